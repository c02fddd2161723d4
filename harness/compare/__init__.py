"""Build B against build A on the same workloads: pure functions, no I/O.

`statistics` judges B's throughputs against A's, paired by repetition (judge_pairs ->
PairedVerdict), and sizes a comparison before and after it runs (detectable_drop,
pairs_needed); `explain` reads both sides' engine step logs and says what changed between
them (explain -> StepChange). The `compare` command runs the builds and writes the results.
"""

from harness.compare.explain import CHANGE, MakespanSplit, StepChange, StepFigures, explain
from harness.compare.statistics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_PAIR_NOISE,
    DEFAULT_POWER,
    DEFAULT_THRESHOLD,
    MAX_PAIRS,
    Outcome,
    PairedVerdict,
    detectable_drop,
    judge_pairs,
    pairs_needed,
)

__all__ = [
    "CHANGE",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_PAIR_NOISE",
    "DEFAULT_POWER",
    "DEFAULT_THRESHOLD",
    "MAX_PAIRS",
    "MakespanSplit",
    "Outcome",
    "PairedVerdict",
    "StepChange",
    "StepFigures",
    "detectable_drop",
    "explain",
    "judge_pairs",
    "pairs_needed",
]
