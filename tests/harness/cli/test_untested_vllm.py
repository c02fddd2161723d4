"""A vLLM outside the tested releases, through the real `batchbench` command.

The server's Python is a bare venv whose `vllm` says it is the version under test (its
package metadata is all the launcher reads before starting it): outside the releases of
launchers.engine.vllm_releases the command stops in one line before anything is made; with
--allow-untested-vllm it goes on to start that "vLLM", which here is no server at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

BATCHBENCH = [sys.executable, "-m", "harness.cli"]


def fake_vllm(root: Path, version: str) -> str:
    """A Python whose `vllm` package metadata says `version`; returns the interpreter's path."""
    venv.create(root, with_pip=False)
    (site,) = root.glob("lib/python*/site-packages")
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return str(root / "bin" / "python")


def batchbench(python: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BATCHBENCH_SERVER_PYTHON": python}
    return subprocess.run([*BATCHBENCH, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchbench: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(("version", "because"), [
    ("0.35.0", "0.35 is newer than the tested 0.30 to 0.34"),
    ("0.34.1.dev3+gabc1234", "a development build"),
    ("0.33.0+acme", "a local build (+acme): a fork or a source build"),
])
def test_a_launch_outside_the_releases_stops_in_one_line_with_nothing_made(tmp_path, version, because):
    python = fake_vllm(tmp_path / "venv", version)
    work = tmp_path / "work"
    work.mkdir()
    result = batchbench(python, "run", "--workload", "cpu-seed-100-200-300-1000", "--launch", "static",
                        "--out", str(work / "run"), cwd=work)
    line = one_error_line(result)
    assert f"vLLM {version} is not a tested release ({because})" in line
    assert "0.30 to 0.34" in line and "--allow-untested-vllm" in line
    assert list(work.iterdir()) == []


def test_a_version_that_is_no_version_is_refused_as_such(tmp_path):
    python = fake_vllm(tmp_path / "venv", "nightly")
    line = one_error_line(batchbench(python, "serve", "--mode", "continuous", cwd=tmp_path))
    assert "vllm: vLLM version 'nightly' is not a version number" in line


def test_gpu_check_refuses_before_it_measures(tmp_path):
    python = fake_vllm(tmp_path / "venv", "0.35.0")
    out = tmp_path / "verdict"
    line = one_error_line(batchbench(python, "gpu-check", "--out", str(out), cwd=tmp_path))
    assert "vLLM 0.35.0 is not a tested release" in line
    assert not out.exists()


def test_the_override_launches_it_and_the_server_record_says_untested(tmp_path):
    python = fake_vllm(tmp_path / "venv", "0.35.0")
    work = tmp_path / "work"
    work.mkdir()
    result = batchbench(python, "run", "--workload", "cpu-seed-100-200-300-1000", "--launch", "static",
                        "--allow-untested-vllm", "--out", str(work / "run"), cwd=work)
    # Past the gate: the launcher started that "vLLM", which is no server, and says the server failed.
    assert result.returncode == 1, result.stderr
    assert "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)" in result.stderr
    info = json.loads((work / ".run-server" / "servers" / "static" / "server.json").read_text())
    assert info["vllm_version"] == "0.35.0"
    assert info["vllm_untested"] == "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)"
