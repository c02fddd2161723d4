"""How often the gate calls each outcome on simulated repetitions: its false alarms and its power.

Each simulated comparison draws `repetitions` baseline and `repetitions` candidate throughputs
with multiplicative lognormal noise (log-scale sigma = `noise`, about the repetitions' CV),
the candidate's true level `drop` below the baseline's, and asks
`harness.gate.statistics.decide` for a verdict. With drop = 0 the regression share is
the false-alarm rate; with a drop beyond the threshold, the detection rate. With
`extra_repetitions`, an inconclusive comparison gets one more candidate repetition at a time, up to
that many, as a nightly's extra repetitions give it (the baseline, from history, stays). Pure and
deterministic for a given seed; benchmarks/gate_statistics.py reports the rates (docs/validation/gate.md).

`resample_outcomes` does the same with noise drawn from measured repetitions instead of a
lognormal: each repetition's log throughput minus the mean of its set (`log_residuals`). A
real server's noise is heavier-tailed than a lognormal of the same spread, so this says
what the rule does on the machine the repetitions came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.gate.rule import GateRule
from harness.gate.statistics import decide

# Any level works: the rule looks at ratios and ranks only.
BASE_TOK_S = 1000.0


@dataclass(frozen=True)
class OutcomeRates:
    """Counts of each outcome over `comparisons` simulated comparisons of one scenario."""

    drop: float
    # The lognormal's sigma; for resampled noise, the residuals' standard deviation.
    noise: float
    repetitions: int
    extra_repetitions: int
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
    drop: float, noise: float, repetitions: int, comparisons: int, seed: int, rule: GateRule | None = None,
    extra_repetitions: int = 0,
) -> OutcomeRates:
    """Verdicts on `comparisons` simulated comparisons of `repetitions` a side (see the module docstring)."""
    if noise < 0:
        raise ValueError(f"need noise >= 0, got {noise}")
    return _outcome_rates(drop, noise, lambda rng, shape: rng.lognormal(0.0, noise, shape), repetitions, comparisons,
                          seed, rule, extra_repetitions)


def resample_outcomes(
    drop: float, residuals: np.ndarray, repetitions: int, comparisons: int, seed: int, rule: GateRule | None = None,
    extra_repetitions: int = 0,
) -> OutcomeRates:
    """As `simulate_outcomes`, each repetition's log-noise drawn (with replacement) from `residuals`."""
    residuals = np.asarray(residuals, dtype=float)
    if residuals.size < 2 or not np.isfinite(residuals).all():
        raise ValueError(f"need at least 2 finite residuals, got {residuals.size}")
    noise = float(residuals.std(ddof=1))
    return _outcome_rates(drop, noise, lambda rng, shape: np.exp(rng.choice(residuals, shape)), repetitions,
                          comparisons, seed, rule, extra_repetitions)


def log_residuals(sets: Sequence[Sequence[float]]) -> np.ndarray:
    """Each throughput's log minus its set's mean log, for sets of repetitions of one level each.

    Scaled by sqrt(n / (n - 1)): a residual from its own set's mean is that much smaller
    than the repetition's deviation from the true level. Sets of fewer than 2 repetitions say
    nothing about noise and are skipped.
    """
    out: list[np.ndarray] = []
    for values in sets:
        logs = np.log(np.asarray(values, dtype=float))
        if logs.size >= 2:
            out.append((logs - logs.mean()) * np.sqrt(logs.size / (logs.size - 1)))
    if not out:
        raise ValueError("no set of 2 or more repetitions to measure noise from")
    return np.concatenate(out)


def _outcome_rates(
    drop: float, noise: float, draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray], repetitions: int,
    comparisons: int, seed: int, rule: GateRule | None, extra_repetitions: int,
) -> OutcomeRates:
    """Verdicts when each repetition's throughput is BASE_TOK_S x (1 - drop for the candidate) x draw()."""
    if not 0 <= drop < 1 or repetitions < 1 or comparisons < 1 or extra_repetitions < 0:
        raise ValueError(f"need 0 <= drop < 1, repetitions >= 1, comparisons >= 1, extra_repetitions >= 0; "
                         f"got {drop}, {repetitions}, {comparisons}, {extra_repetitions}")
    rng = np.random.default_rng(seed)
    baseline = BASE_TOK_S * draw(rng, (comparisons, repetitions))
    candidate = BASE_TOK_S * (1 - drop) * draw(rng, (comparisons, repetitions + extra_repetitions))
    outcomes = [_sequential_outcome(b, c, repetitions, rule) for b, c in zip(baseline, candidate, strict=True)]
    return OutcomeRates(
        drop=drop, noise=noise, repetitions=repetitions, extra_repetitions=extra_repetitions, comparisons=comparisons,
        passed=outcomes.count("pass"),
        regressions=outcomes.count("regression"), inconclusive=outcomes.count("inconclusive"),
    )


def _sequential_outcome(baseline: np.ndarray, candidate: np.ndarray, first: int, rule: GateRule | None) -> str:
    """The verdict on the first `first` candidate repetitions, then on one more while inconclusive."""
    for n in range(first, candidate.size + 1):
        outcome = decide(baseline.tolist(), candidate[:n].tolist(), rule).outcome
        if outcome != "inconclusive":
            break
    return outcome
