"""Bad input through the real `batchbench` command: one line, exit 2, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
import venv

import pytest

BATCHBENCH = [sys.executable, "-m", "harness.cli"]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*BATCHBENCH, *args], capture_output=True, text=True, timeout=120, env=env)


def assert_usage_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("batchbench: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["serve", "--mode", "dynamic"], "unknown mode 'dynamic'"),
        (["serve", "--mode", "static", "--max-num-seqs", "0"], "--max-num-seqs: Input should be greater than 0"),
        (["serve", "--mode", "static", "--max-num-seqs", "-2"], "--max-num-seqs: Input should be greater than 0"),
        (["serve", "--mode", "static", "--max-num-seqs", "many"], "--max-num-seqs: invalid int value"),
        (["serve", "--mode", "static", "--model", "./no/such/model"], "model path does not exist"),
        (["serve", "--mode", "static", "--model", "not a model"], "unknown model 'not a model'"),
        (["serve", "--mode", "static", "--model", ""], "model must not be empty"),
        (["serve"], "--mode"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments(args, fragment):
    assert_usage_error(run_cli(*args), fragment)


def test_busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert_usage_error(
            run_cli("serve", "--mode", "static", "--port", str(port)), f"port {port} on 127.0.0.1 is already in use"
        )


def test_vllm_not_installed(tmp_path):
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)
    env = {"BATCHBENCH_SERVER_PYTHON": str(bare / "bin" / "python"), "PATH": "/usr/bin:/bin"}
    assert_usage_error(run_cli("serve", "--mode", "continuous", env=env), "its environment has no vLLM")


def test_prepare_model_prints_a_directory_with_a_config():
    result = run_cli("prepare-model", "llama-3.1-8b")
    assert result.returncode == 0, result.stderr
    path, note = result.stdout.split()[0], result.stdout.split(maxsplit=1)[1]
    assert (__import__("pathlib").Path(path) / "config.json").is_file()
    assert "--load-format dummy" in note
