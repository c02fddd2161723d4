"""The results history: one SQLite row per repetition, and each configuration's baseline.

`rows` defines a repetition (RepetitionRow) and its keys, `from_run` builds one from an assessed
run, `from_dir` one from every run under a result directory, `store` keeps them
(HistoryStore: append, frame, baseline), `baseline` groups a configuration's accepted
repetitions into the nights the regression gate compares against.
"""

from harness.history.baseline import Baseline, BaselineNight
from harness.history.from_run import repetition_from_run
from harness.history.rows import RepetitionRow, Source
from harness.history.store import HistoryStore

__all__ = [
    "Baseline",
    "BaselineNight",
    "HistoryStore",
    "Source",
    "RepetitionRow",
    "repetition_from_run",
]
