"""Which lock `make setup` installs into .venv, and why, before any venv exists.

Prints two lines: the lock's path, then the one line set-up shows ("set-up: GPU lock
requirements/gpu.lock (nvidia-smi lists 1 GPU: NVIDIA H100 80GB HBM3)"). In order:

- `BATCHBENCH_PLATFORM=cpu|gpu` chooses outright; any other value is one line on stderr, exit 2;
- `BATCHBENCH_SERVER_PYTHON` names a vLLM environment that serves the runs: the harness's own
  venv then needs no CUDA stack, so it gets the CPU lock;
- a host whose `nvidia-smi` lists a GPU gets the GPU lock; any other host the CPU lock.

It runs with the system's python3 (the Makefile's $(PYTHON)), so it uses the standard
library only and keeps to Python 3.8's syntax.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence

CPU_LOCK = "requirements/cpu.lock"
GPU_LOCK = "requirements/gpu.lock"
PLATFORM_ENV = "BATCHBENCH_PLATFORM"
# Read by the harness too (harness.settings.SERVER_PYTHON_ENV); this script runs before it is installed.
SERVER_PYTHON_ENV = "BATCHBENCH_SERVER_PYTHON"
LOCKS = {"cpu": CPU_LOCK, "gpu": GPU_LOCK}
# nvidia-smi answers in well under a second; a wedged driver can hang it.
NVIDIA_SMI_TIMEOUT_S = 20


class UsageError(Exception):
    """Bad input: one line naming what is wrong."""


def choose(environ: Mapping[str, str]) -> tuple[str, str]:
    """The lock to install and the line that says why, from the environment and `nvidia-smi` on its PATH."""
    override = environ.get(PLATFORM_ENV, "")
    if override:
        if override not in LOCKS:
            raise UsageError(f"set-up: {PLATFORM_ENV} must be cpu or gpu, not {override!r}")
        return _chosen(override, f"{PLATFORM_ENV}={override}")
    server_python = environ.get(SERVER_PYTHON_ENV, "")
    if server_python:
        if not (os.path.isfile(server_python) and os.access(server_python, os.X_OK)):
            raise UsageError(f"set-up: {SERVER_PYTHON_ENV}={server_python} is not an executable file")
        return _chosen("cpu", f"vLLM servers run from {SERVER_PYTHON_ENV}={server_python}, so this venv needs no CUDA")
    has_gpu, evidence = nvidia_gpus(environ.get("PATH", os.defpath))
    return _chosen("gpu" if has_gpu else "cpu", evidence if has_gpu else f"no NVIDIA GPU: {evidence}")


def nvidia_gpus(path: str) -> tuple[bool, str]:
    """Whether `nvidia-smi` (looked up on `path`) lists a GPU, and what it said, in a few words."""
    smi = shutil.which("nvidia-smi", path=path)
    if smi is None:
        return False, "nvidia-smi not found"
    try:
        answer = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"nvidia-smi did not answer in {NVIDIA_SMI_TIMEOUT_S} s"
    except OSError as exc:
        return False, f"nvidia-smi did not start: {exc.strerror}"
    names = [line.strip() for line in answer.stdout.splitlines() if line.strip()]
    if answer.returncode != 0:
        said = (answer.stdout + answer.stderr).strip().splitlines()
        return False, f"nvidia-smi exited {answer.returncode}" + (f": {said[0].strip()}" if said else "")
    if not names:
        return False, "nvidia-smi lists no GPU"
    return True, f"nvidia-smi lists {_count(len(names))}: {', '.join(dict.fromkeys(names))}"


def _count(gpus: int) -> str:
    return f"{gpus} GPU" + ("" if gpus == 1 else "s")


def _chosen(platform: str, why: str) -> tuple[str, str]:
    lock = LOCKS[platform]
    return lock, f"set-up: {platform.upper()} lock {lock} ({why})"


def main(argv: Sequence[str]) -> int:
    """Print the chosen lock and the line saying why; 2 with one line on stderr for bad input."""
    if argv:
        print(f"usage: {sys.argv[0]} (no arguments; reads {PLATFORM_ENV}, {SERVER_PYTHON_ENV} and PATH)",
              file=sys.stderr)
        return 2
    try:
        lock, why = choose(os.environ)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(lock)
    print(why)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
