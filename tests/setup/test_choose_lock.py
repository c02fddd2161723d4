"""Set-up by platform: the GPU lock on a host whose nvidia-smi lists a GPU, else the CPU lock.

A pretend GPU host is a stand-in `nvidia-smi` first on PATH; a host without one has every
folder holding a real `nvidia-smi` taken off PATH, so the tests mean the same on a GPU host.
The chooser (setup/choose_lock.py) runs as make runs it; `make setup` itself runs in a copy of
the set-up's files whose Python makes a stand-in venv that records what it is asked to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHOOSER = ROOT / "setup" / "choose_lock.py"
H100 = "NVIDIA H100 80GB HBM3"
# Answers the query the chooser asks, as the real one does; anything else is a test's mistake.
STAND_IN_SMI = """#!/bin/sh
[ "$*" = "--query-gpu=name --format=csv,noheader" ] || { echo "unexpected: $*" >&2; exit 64; }
printf '%s' "$ANSWER"
exit "${SMI_EXIT:-0}"
"""


def path_without_nvidia_smi() -> str:
    """This PATH less any folder holding a real nvidia-smi."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(folder for folder in folders if not Path(folder, "nvidia-smi").exists())


def host(tmp_path: Path, answer: str | None, exit_code: int = 0, **variables: str) -> dict[str, str]:
    """An environment for a host whose nvidia-smi prints `answer` and exits `exit_code`; None: no nvidia-smi."""
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("MAKE") and key not in ("BATCHBENCH_PLATFORM", "BATCHBENCH_SERVER_PYTHON")}
    path = path_without_nvidia_smi()
    if answer is not None:
        folder = tmp_path / "pretend-gpu-bin"
        folder.mkdir(exist_ok=True)
        smi = folder / "nvidia-smi"
        smi.write_text(STAND_IN_SMI)
        smi.chmod(0o755)
        path = f"{folder}{os.pathsep}{path}"
        environ.update(ANSWER=answer, SMI_EXIT=str(exit_code))
    return {**environ, "PATH": path, **variables}


def choose(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHOOSER)], env=environ, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("answer", "because"), [
    (f"{H100}\n", f"nvidia-smi lists 1 GPU: {H100}"),
    (f"{H100}\n{H100}\n", f"nvidia-smi lists 2 GPUs: {H100}"),
    (f"{H100}\nNVIDIA A100-SXM4-40GB\n", f"nvidia-smi lists 2 GPUs: {H100}, NVIDIA A100-SXM4-40GB"),
])
def test_a_host_whose_nvidia_smi_lists_a_gpu_gets_the_gpu_lock(tmp_path, answer, because):
    result = choose(host(tmp_path, answer))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"requirements/gpu.lock\nset-up: GPU lock requirements/gpu.lock ({because})\n"
    assert result.stderr == ""


@pytest.mark.parametrize(("answer", "exit_code", "because"), [
    (None, 0, "nvidia-smi not found"),
    ("", 0, "nvidia-smi lists no GPU"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\nMake sure ...\n", 9,
     "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
])
def test_any_other_host_gets_the_cpu_lock_and_the_line_says_why(tmp_path, answer, exit_code, because):
    result = choose(host(tmp_path, answer, exit_code))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "requirements/cpu.lock", f"set-up: CPU lock requirements/cpu.lock (no NVIDIA GPU: {because})"]


@pytest.mark.parametrize(("answer", "platform"), [(f"{H100}\n", "cpu"), (None, "gpu")])
def test_batchbench_platform_chooses_the_other_lock(tmp_path, answer, platform):
    result = choose(host(tmp_path, answer, BATCHBENCH_PLATFORM=platform))
    assert result.stdout.splitlines() == [
        f"requirements/{platform}.lock",
        f"set-up: {platform.upper()} lock requirements/{platform}.lock (BATCHBENCH_PLATFORM={platform})"]


def test_a_named_vllm_environment_leaves_the_harness_the_cpu_lock(tmp_path):
    result = choose(host(tmp_path, f"{H100}\n", BATCHBENCH_SERVER_PYTHON=sys.executable))
    assert result.stdout.splitlines() == ["requirements/cpu.lock", (
        f"set-up: CPU lock requirements/cpu.lock (vLLM servers run from BATCHBENCH_SERVER_PYTHON={sys.executable},"
        " so this venv needs no CUDA)")]


@pytest.mark.parametrize(("variables", "line"), [
    ({"BATCHBENCH_PLATFORM": "tpu"}, "set-up: BATCHBENCH_PLATFORM must be cpu or gpu, not 'tpu'"),
    ({"BATCHBENCH_SERVER_PYTHON": "/no/such/python"},
     "set-up: BATCHBENCH_SERVER_PYTHON=/no/such/python is not an executable file"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, variables, line):
    result = choose(host(tmp_path, f"{H100}\n", **variables))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")
    # make stops with the same line, in its own words ("Makefile:N: *** ...  Stop."), and its exit 2.
    made = make(["-n", "setup"], ROOT, host(tmp_path, f"{H100}\n", **variables))
    (made_line,) = made.stderr.splitlines()
    assert made.returncode == 2 and made_line.endswith(f": *** {line}.  Stop.")


def make(arguments: list[str], where: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", *arguments], cwd=where, env=environ,
                          capture_output=True, text=True, timeout=120)


def installs(recipe: str) -> list[str]:
    """The requirement files the recipe's pip installs read."""
    return [line.split(" -r ", 1)[1].split()[0] for line in recipe.splitlines()
            if "pip install" in line and " -r " in line]


def test_make_setup_on_a_pretend_gpu_host_installs_the_gpu_lock_and_not_the_cpu_lock(tmp_path):
    # -B: the whole recipe, whatever this checkout's .venv holds; -n: nothing is run.
    result = make(["-n", "-B", "setup"], ROOT, host(tmp_path, f"{H100}\n"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"set-up: GPU lock requirements/gpu.lock (nvidia-smi lists 1 GPU: {H100})"
    assert installs(result.stdout) == ["requirements/gpu.lock"]
    # The GPU lock's vLLM needs its torchvision and torchaudio; only a CPU venv drops them.
    assert "uninstall" not in result.stdout


def test_make_setup_without_a_gpu_installs_the_cpu_lock(tmp_path):
    result = make(["-n", "-B", "setup"], ROOT, host(tmp_path, None))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "set-up: CPU lock requirements/cpu.lock (no NVIDIA GPU: nvidia-smi not found)"
    assert installs(result.stdout) == ["requirements/cpu.lock"]
    assert "pip uninstall --quiet -y torchvision torchaudio torchcodec" in result.stdout


# The venv's Python: records each call and succeeds. The system's Python: makes that venv, runs anything else.
STAND_IN_VENV_PYTHON = '#!/bin/sh\necho "$*" >> "$INSTALL_LOG"\n'
STAND_IN_SYSTEM_PYTHON = """#!/bin/sh
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$VENV_PYTHON" "$3/bin/python" && echo "new venv $3" >> "$INSTALL_LOG"
else
  exec {python} "$@"
fi
"""


@pytest.fixture
def checkout(tmp_path):
    """The set-up's own files, with stand-in Pythons; `make setup` there installs nothing."""
    where = tmp_path / "checkout"
    names = ("Makefile", "pyproject.toml", "setup/choose_lock.py", "requirements/cpu.lock", "requirements/gpu.lock")
    for name in names:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, where / name)
    for name, text in (("venv-python", STAND_IN_VENV_PYTHON),
                       ("system-python", STAND_IN_SYSTEM_PYTHON.format(python=sys.executable))):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    return where


def set_up(checkout: Path, environ: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`make -s setup` in the checkout; what it printed and the venv Python's calls since the last."""
    log = checkout.parent / "install.log"
    log.write_text("")
    environ = {**environ, "INSTALL_LOG": str(log), "VENV_PYTHON": str(checkout.parent / "venv-python")}
    result = make(["-s", "setup", f"PYTHON={checkout.parent / 'system-python'}"], checkout, environ)
    return result, log.read_text().splitlines()


def test_set_up_on_a_pretend_gpu_host_never_installs_the_cpu_lock_and_is_idempotent(tmp_path, checkout):
    gpu_host = host(tmp_path, f"{H100}\n")
    result, calls = set_up(checkout, gpu_host)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"set-up: GPU lock requirements/gpu.lock (nvidia-smi lists 1 GPU: {H100})\n"
    assert calls[0] == "new venv .venv"
    assert installs("\n".join(calls)) == ["requirements/gpu.lock"]
    assert not any("cpu.lock" in call or "uninstall" in call for call in calls)
    assert (checkout / ".venv" / ".made-from").read_text() == "requirements/gpu.lock\n"
    # Again: the line, and nothing installed.
    again, calls = set_up(checkout, gpu_host)
    assert (again.returncode, again.stdout, calls) == (0, result.stdout, [])


def test_a_venv_made_from_the_other_lock_is_made_anew(tmp_path, checkout):
    set_up(checkout, host(tmp_path, f"{H100}\n"))
    result, calls = set_up(checkout, host(tmp_path, f"{H100}\n", BATCHBENCH_PLATFORM="cpu"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "set-up: CPU lock requirements/cpu.lock (BATCHBENCH_PLATFORM=cpu)",
        "set-up: .venv was made from another lock; making it anew from requirements/cpu.lock"]
    assert calls[0] == "new venv .venv"
    assert installs("\n".join(calls)) == ["requirements/cpu.lock"]
    assert (checkout / ".venv" / ".made-from").read_text() == "requirements/cpu.lock\n"
