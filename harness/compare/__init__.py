"""Build B against build A on the same workloads: pure functions, no I/O.

`statistics` judges B's throughputs against A's, paired by repetition (judge_pairs ->
PairedVerdict), and sizes a comparison before and after it runs (detectable_drop,
pairs_needed); `explain` reads both sides' engine step logs and says what changed between
them (explain -> StepChange). The `compare` command runs the builds and writes the results.

The package itself holds only the rule's defaults, so that the command's flags are built
without loading SciPy or pandas (tests/harness/cli/test_startup.py).
"""

DEFAULT_THRESHOLD = 0.03
# sd of log(B / A) over one pair, as measured on a 2-core CPU host (docs/validation/compare.md):
# 4-9% with runs of ~10 s, 2.4-6.5% with runs of 13-30 s. A quieter machine or longer runs pass
# their own (--pair-noise); the report states the drop caught again at the noise measured.
DEFAULT_PAIR_NOISE = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_POWER = 0.8
