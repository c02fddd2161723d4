"""How often the gate calls each outcome on simulated trials: its false alarms and its power.

Each simulated comparison draws `trials` baseline and `trials` candidate throughputs
with multiplicative lognormal noise (log-scale sigma = `noise`, about the trials' CV),
the candidate's true level `drop` below the baseline's, and asks
`harness.gate.statistics.decide` for a verdict. With drop = 0 the regression share is
the false-alarm rate; with a drop beyond the threshold, the detection rate. With
`extra_trials`, an inconclusive comparison gets one more candidate trial at a time, up to
that many, as a nightly's extra rounds give it (the baseline, from history, stays). Pure and
deterministic for a given seed; benchmarks/gate_statistics.py reports the issue's figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.gate.statistics import GateRule, decide

# Any level works: the rule looks at ratios and ranks only.
BASE_TOK_S = 1000.0


@dataclass(frozen=True)
class OutcomeRates:
    """Counts of each outcome over `comparisons` simulated comparisons of one scenario."""

    drop: float
    noise: float
    trials: int
    extra_trials: int
    comparisons: int
    passed: int
    regressions: int
    inconclusive: int

    @property
    def regression_rate(self) -> float:
        """Share of comparisons called a regression."""
        return self.regressions / self.comparisons

    @property
    def inconclusive_rate(self) -> float:
        """Share of comparisons called inconclusive."""
        return self.inconclusive / self.comparisons


def simulate_outcomes(
    drop: float, noise: float, trials: int, comparisons: int, seed: int, rule: GateRule | None = None,
    extra_trials: int = 0,
) -> OutcomeRates:
    """Verdicts on `comparisons` simulated comparisons of `trials` a side (see the module docstring)."""
    if not 0 <= drop < 1 or noise < 0 or trials < 1 or comparisons < 1 or extra_trials < 0:
        raise ValueError(f"need 0 <= drop < 1, noise >= 0, trials >= 1, comparisons >= 1, extra_trials >= 0; "
                         f"got {drop}, {noise}, {trials}, {comparisons}, {extra_trials}")
    rng = np.random.default_rng(seed)
    baseline = BASE_TOK_S * rng.lognormal(0.0, noise, (comparisons, trials))
    candidate = BASE_TOK_S * (1 - drop) * rng.lognormal(0.0, noise, (comparisons, trials + extra_trials))
    outcomes = [_sequential_outcome(b, c, trials, rule) for b, c in zip(baseline, candidate, strict=True)]
    return OutcomeRates(
        drop=drop, noise=noise, trials=trials, extra_trials=extra_trials, comparisons=comparisons,
        passed=outcomes.count("pass"),
        regressions=outcomes.count("regression"), inconclusive=outcomes.count("inconclusive"),
    )


def _sequential_outcome(baseline: np.ndarray, candidate: np.ndarray, first: int, rule: GateRule | None) -> str:
    """The verdict on the first `first` candidate trials, then on one more while inconclusive."""
    for n in range(first, candidate.size + 1):
        outcome = decide(baseline.tolist(), candidate[:n].tolist(), rule).outcome
        if outcome != "inconclusive":
            break
    return outcome
