"""The workload YAML files shipped with batchbench (package data beside this module)."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UsageError

_HERE = Path(__file__).resolve().parent
SUITES_DIR = _HERE / "suites"


def list_builtin_workloads() -> list[str]:
    """Names of the shipped workloads (file names without .yaml), sorted."""
    return sorted(path.stem for path in _HERE.glob("*.yaml"))


def builtin_workload_path(name: str) -> Path:
    """Path of the shipped workload `name` ("anyscale-cap128" or "anyscale-cap128.yaml")."""
    stem = name.removesuffix(".yaml")
    if stem not in list_builtin_workloads():
        raise UsageError(
            f"{name}: no builtin workload of that name (builtins:"
            f" {', '.join(list_builtin_workloads())})"
        )
    return _HERE / f"{stem}.yaml"


def list_builtin_suites() -> list[str]:
    """Names of the shipped nightly suites (file names without .yaml under suites/), sorted."""
    return sorted(path.stem for path in SUITES_DIR.glob("*.yaml"))
