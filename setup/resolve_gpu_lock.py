"""Write requirements/gpu.lock with pip's resolver, or check that the lock as written resolves.

The GPU lock is what `make setup` installs (--no-deps) on a host with an NVIDIA GPU
(setup/choose_lock.py): pyproject's dependencies with its gpu and test extras, so upstream
vLLM with its CUDA torch and libraries, every package pinned, for Linux x86_64 and CPython
3.11. pip resolves it in a dry run for that platform, wheels only, which reads the wheels'
metadata and downloads none, so it runs on any host whose pip index reaches them (about
half a minute). Packages the CPU lock installs --no-deps because their metadata conflicts
with the pins (apache-otava) are copied from it, pin and all.

    python3 setup/resolve_gpu_lock.py           # write requirements/gpu.lock
    python3 setup/resolve_gpu_lock.py --check   # exit 0 when the lock resolves to exactly itself, else 1

It needs Python 3.11 (tomllib) and pip 22.2 or newer (--dry-run, --report): any Python that
has them resolves for the target, not for itself.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU_LOCK = ROOT / "requirements" / "gpu.lock"
CPU_LOCK = ROOT / "requirements" / "cpu.lock"
PYTHON_VERSION = "3.11"
# The newest glibc floor among the locked wheels: llguidance 1.7 (vLLM 0.33.0 needs < 1.8) has only
# manylinux_2_31 wheels. Offering newer tags would let pip pick wheels an older host cannot install.
GLIBC_MINOR = 31
EXTRAS = ("gpu", "test")
# Installed --no-deps beside the lock: harness.nightly.changes says why.
NO_DEPS = ("apache-otava",)


def platform_options() -> list[str]:
    """pip's options that resolve for Linux x86_64 with glibc 2.5 to 2.GLIBC_MINOR and CPython 3.11, wheels only."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    return [*(option for tag in tags for option in ("--platform", tag)), "--python-version", PYTHON_VERSION,
            "--implementation", "cp", "--only-binary=:all:"]


def wanted() -> list[str]:
    """pyproject's dependencies and the requirements of its gpu and test extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *(line for extra in EXTRAS for line in project["optional-dependencies"][extra])]


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """A lock's `name==version` lines, by canonical name, comments and blank lines skipped."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[canonical(name)] = version
    return found


def no_deps_lines() -> list[str]:
    """The CPU lock's lines for the packages installed --no-deps."""
    return [line for line in CPU_LOCK.read_text().splitlines()
            if line.strip() and canonical(line.split("==")[0]) in NO_DEPS]


def dry_run(requirements: list[str]) -> dict[str, str]:
    """What pip would install for `requirements` on the target platform: name as published -> version."""
    with tempfile.TemporaryDirectory() as scratch:
        listed = Path(scratch, "requirements.txt")
        listed.write_text("\n".join(requirements) + "\n")
        report = Path(scratch, "report.json")
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--report", str(report), "--target", str(Path(scratch, "target")), *platform_options(),
                   "-r", str(listed)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
            raise SystemExit("pip could not resolve: " + (" | ".join(errors) or result.stderr.strip()))
        installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in installs}


def write_lock() -> None:
    """Resolve pyproject's requirements and write them, with the --no-deps lines, as the GPU lock."""
    resolved = dry_run(wanted())
    lines = sorted([f"{name}=={version}" for name, version in resolved.items()] + no_deps_lines(), key=str.lower)
    header = [
        "# The GPU lock: `make setup` installs it --no-deps on a host with an NVIDIA GPU (setup/choose_lock.py).",
        "# pyproject's dependencies with its gpu and test extras (upstream vLLM, its CUDA torch and libraries),",
        f"# for Linux x86_64 (glibc 2.{GLIBC_MINOR} or newer) and CPython {PYTHON_VERSION}. Written by",
        f"# `python3 setup/resolve_gpu_lock.py` (pip's resolver, dry run) on {datetime.date.today()};",
        "# `--check` resolves it again. " + ", ".join(NO_DEPS) + " comes from the CPU lock (installed --no-deps).",
    ]
    GPU_LOCK.write_text("\n".join(header + lines) + "\n")
    print(f"{GPU_LOCK.relative_to(ROOT)}: {len(lines)} packages")


def check_lock(lock: Path) -> int:
    """0 when the lock's pins, resolved with their dependencies, are exactly the lock; 1 with the difference."""
    locked = pins(lock.read_text())
    resolvable = {name: version for name, version in locked.items() if name not in NO_DEPS}
    resolved = {canonical(name): version for name, version in dry_run(
        [f"{name}=={version}" for name, version in resolvable.items()]).items()}
    if resolved != resolvable:
        extra = sorted(f"{name}=={version}" for name, version in resolved.items() if name not in resolvable)
        print(f"{lock} is not complete: its pins also pull in {', '.join(extra)}",
              file=sys.stderr)
        return 1
    print(f"{lock} resolves: {len(resolved)} packages, with their dependencies, for"
          f" Linux x86_64 (glibc 2.{GLIBC_MINOR}) and CPython {PYTHON_VERSION}")
    return 0


def main(argv: list[str]) -> int:
    """Write the GPU lock, or with --check say whether it resolves."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="resolve the lock as written (dry run); write nothing")
    parser.add_argument("--lock", type=Path, default=GPU_LOCK, help="the lock --check reads (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check:
        return check_lock(args.lock)
    write_lock()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
