"""The results history: one SQLite row per trial, and each configuration's baseline.

`rows` defines a trial (TrialRow) and its keys, `from_run` builds one from an assessed
run, `from_dir` one from every run under a result directory, `store` keeps them
(HistoryStore: append, frame, baseline), `baseline` groups a configuration's accepted
trials into the nights the regression gate compares against.
"""

from harness.history.baseline import DEFAULT_BASELINE_BATCHES, Baseline, BaselineBatch
from harness.history.from_run import trial_from_run
from harness.history.rows import Source, TrialRow
from harness.history.store import HistoryStore

__all__ = [
    "DEFAULT_BASELINE_BATCHES",
    "Baseline",
    "BaselineBatch",
    "HistoryStore",
    "Source",
    "TrialRow",
    "trial_from_run",
]
