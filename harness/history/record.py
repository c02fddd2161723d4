"""Appending a command's assessed runs to the results history, as one batch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from harness.analysis.cells import AssessedRun
from harness.history.from_run import trial_from_run
from harness.history.rows import Source
from harness.history.store import HistoryStore
from harness.settings import HISTORY_DEFAULT_HELP


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    """--history and --no-history, for the commands that record their runs (run, reproduce)."""
    parser.add_argument("--history", type=Path, help="results history to append the runs to (default:"
                        f" {HISTORY_DEFAULT_HELP})")
    parser.add_argument("--no-history", action="store_true", help="do not append the runs to the results history")


def record(store: HistoryStore, runs: Sequence[AssessedRun], source: Source, batch_id: str) -> int:
    """Append `runs` as one batch (not accepted into baselines: only nightly batches are)."""
    return store.append(trial_from_run(run, source=source, batch_id=batch_id, accepted=False) for run in runs)
