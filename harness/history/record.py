"""Appending a command's assessed runs to the results history, as one invocation."""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.cells import AssessedRun
from harness.history.from_run import repetition_from_run
from harness.history.rows import Source
from harness.history.store import HistoryStore


def record(store: HistoryStore, runs: Sequence[AssessedRun], source: Source, invocation_id: str) -> int:
    """Append `runs` under one `invocation_id` (not accepted into baselines: only nights are)."""
    return store.append(repetition_from_run(run, source=source, invocation_id=invocation_id, accepted=False)
                        for run in runs)
