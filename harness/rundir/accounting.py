"""Rows against the plan: does a run's records.parquet answer for every planned request?

Pure; used by `run` at its end and by `analyze` before it trusts a run. A run owes one
row per planned request, except a closed loop's tail that its duration never reached
(`not_due`, always the last requests of the plan: a closed loop hands them out in order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

# Ids named in a problem line, at most: the line stays one line.
SHOWN_IDS = 5


def owed_ids(planned: int, not_due: int) -> range:
    """The request ids a run must have rows for."""
    return range(planned - not_due)


def row_problems(request_ids: Iterable[int], planned: int, not_due: int) -> list[str]:
    """What is wrong with a run's rows: missing, repeated or unplanned request ids (empty: none)."""
    counts = Counter(int(i) for i in request_ids)
    owed = owed_ids(planned, not_due)
    problems = []
    missing = [i for i in owed if i not in counts]
    if missing:
        problems.append(f"{len(missing)} planned requests have no row (ids {_ids(missing)})")
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        problems.append(f"{len(repeated)} requests have more than one row (ids {_ids(repeated)})")
    unplanned = sorted(i for i in counts if i not in owed)
    if unplanned:
        problems.append(f"{len(unplanned)} rows are not in the plan's owed requests (ids {_ids(unplanned)})")
    return problems


def _ids(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:SHOWN_IDS]))
    return shown + (", ..." if len(ids) > SHOWN_IDS else "")
