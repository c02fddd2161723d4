"""Spread levels: the output-length cap of a workload (an int) or, for any other
workload, its name (a str). One definition of what a level is and how it is named."""

from __future__ import annotations

from typing import TypeGuard

import numpy as np

Level = int | str


def is_cap(level: object) -> TypeGuard[int]:
    """Whether `level` is an output-length cap (numpy integers from pandas columns count)."""
    return isinstance(level, (int, np.integer))


def level_name(level: Level) -> str:
    """How a spread level is labelled: `cap 128` for a cap, the label itself otherwise."""
    return f"cap {level}" if is_cap(level) else str(level)


def level_order(level: Level) -> tuple[bool, int, str]:
    """Sort key: caps first, in numeric order (32 before 128), then named workloads by name."""
    return (not is_cap(level), int(level) if is_cap(level) else 0, "" if is_cap(level) else str(level))
