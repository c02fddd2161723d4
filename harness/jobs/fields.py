"""Checked kinds of job settings: paths a job may write, directories it reads, addresses, counts.

Each is an annotated type a pydantic model (a job's config, a command's options) validates;
the message of a bad value names what is wrong, and the command line adds the flag.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, Strict

from harness.driver.distributed.wire import parse_address

MAX_REPETITIONS = 1_000
# Load worker processes of one run (--workers): far past what one client machine runs.
MAX_WORKERS = 256
WORKERS_HELP = ("load worker processes under a Locust master, on this machine, the plan split across them"
                " (docs/distributed.md); 1: one process, no master")
# Minutes a job is sized to fill.
BudgetMinutes = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]

Positive = Annotated[int, Strict(), Field(gt=0)]


def writable_destination(path: Path) -> Path:
    """A path a command may create a directory at: not a file, not under one, in a writable place."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is a file, not a directory")
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{path} lies under {ancestor}, which is a file")
    probe = path if path.exists() else ancestor
    # Try it: permission bits do not bind root, and a read-only or special file system
    # refuses whatever they say. The probe directory is removed at once.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".batchbench-probe-", dir=probe))
    except OSError as exc:
        raise ValueError(f"cannot create anything in {probe}: {exc.strerror or exc}") from exc
    return path


OutDir = Annotated[Path, AfterValidator(writable_destination)]


def named_workloads(workloads: tuple[str, ...]) -> tuple[str, ...]:
    """The workload names given, stripped, blanks left out; at least one."""
    named = tuple(name.strip() for name in workloads if name.strip())
    if not named:
        raise ValueError("name at least one workload")
    return named


# A comma-separated list of workload files or names (a job's --workloads).
WorkloadNames = Annotated[tuple[str, ...], Field(min_length=1), AfterValidator(named_workloads)]


def writable_file(path: Path) -> Path:
    """A file a command may write: not a directory, in a directory it can create or write."""
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a file")
    writable_destination(path.parent)
    return path


OutFile = Annotated[Path, AfterValidator(writable_file)]


def existing_directory(path: str) -> str:
    """A directory that is there (a tokenizer is read from one; nothing is downloaded)."""
    if not Path(path).expanduser().is_dir():
        raise ValueError(f"{path} is not a directory")
    return path


ExistingDir = Annotated[str, AfterValidator(existing_directory)]


def network_address(text: str) -> str:
    """HOST[:PORT] with a host that resolves (harness.driver.distributed.wire.parse_address)."""
    parse_address(text)
    return text


Address = Annotated[str, AfterValidator(network_address)]
Workers = Annotated[int, Strict(), Field(gt=0, le=MAX_WORKERS)]
