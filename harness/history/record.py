"""Appending a command's assessed runs to the results history, as one batch."""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.cells import AssessedRun
from harness.history.from_run import trial_from_run
from harness.history.rows import Source
from harness.history.store import HistoryStore


def record(store: HistoryStore, runs: Sequence[AssessedRun], source: Source, batch_id: str) -> int:
    """Append `runs` as one batch (not accepted into baselines: only nightly batches are)."""
    return store.append(trial_from_run(run, source=source, batch_id=batch_id, accepted=False) for run in runs)
