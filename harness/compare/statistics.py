"""Paired judgement of build B against build A: pass, regression or inconclusive. Pure, no I/O.

A and B run interleaved (A B B A ...) on the same workload and system, so repetition i of
each forms pair i, and the pair's log ratio d_i = log(b_i / a_i) cancels the drift the two
runs share. The values are measured throughputs (tok/s, higher is better).

- Point: exp(mean d), the geometric mean of the pair ratios B / A.
- Interval: exp(mean d -/+ t_{n-1, (1+c)/2} * sd(d) / sqrt(n)), Student's t interval on the
  log ratios, exact when they are normal. sd(d) is the pair noise.
- Rule, with the line at 1 - threshold: a regression when the interval lies wholly below 1
  (B is slower) and the point below the line; a pass when the interval's low end is at or
  above the line (any drop is smaller than the threshold); inconclusive otherwise.
- Power: when the log ratios are normal with sd `noise`, mean(d) and sd(d) are independent,
  so the chance of each outcome is a one-dimensional integral over sd(d)'s chi distribution.
  It is taken on a fixed midpoint grid of that distribution's quantiles (deterministic);
  `detectable_drop` and `pairs_needed` invert it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

from harness.analysis.stats import paired_ratio_ci
from harness.compare import DEFAULT_CONFIDENCE, DEFAULT_POWER, DEFAULT_THRESHOLD

# The same three outcomes as harness.gate.statistics.Outcome; the layers contract keeps the
# gate and this package from importing each other.
Outcome = Literal["pass", "regression", "inconclusive"]

# Past this many pairs a result counts as out of reach: no comparison repeats that often.
MAX_PAIRS = 10_000

# Quantile nodes of sd(d) / noise for the power integral: within 1e-4 of adaptive quadrature.
_GRID = 512
# A mean log ratio below this is a drop that float arithmetic cannot tell from 100%.
_MU_FLOOR = math.log(float(np.finfo(np.float64).eps))
# brentq's tolerance on the mean log ratio: a millionth of a percent of drop.
_MU_TOLERANCE = 1e-9

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PairedVerdict:
    """B judged against A over paired repetitions, and every figure behind the judgement."""

    outcome: Outcome
    pairs: int
    # exp(mean log(b_i / a_i)) and its t interval at `confidence`.
    ratio: float
    low: float
    high: float
    confidence: float
    # sd of log(b_i / a_i) across the pairs: the pair noise observed.
    noise: float
    threshold: float
    # The smallest drop these pairs call a regression DEFAULT_POWER of the time at the observed
    # noise (math.inf when none short of 100% is).
    detectable_drop: float
    # Why this outcome, in plain words with figures; the first says what decided it.
    reasons: tuple[str, ...]

    @property
    def line(self) -> float:
        """The ratio below which a drop counts: 1 - threshold."""
        return 1.0 - self.threshold


def judge_pairs(
    a: Sequence[float],
    b: Sequence[float],
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedVerdict:
    """Judge B's throughputs against A's, pair i being repetition i of each (tok/s, higher is better).

    ValueError with fewer than 2 pairs, sides of different lengths, a value that is not finite
    and > 0, or a threshold or confidence outside (0, 1).
    """
    _check_rule(threshold, confidence)
    d = _log_ratios(a, b)
    n = int(d.size)
    noise = float(d.std(ddof=1))
    # The same paired estimate as the reports' headline ratios (harness.analysis.stats).
    estimate = paired_ratio_ci(b, a, confidence)
    ratio, low, high = estimate.point, estimate.low, estimate.high
    line = 1.0 - threshold
    detectable = detectable_drop(n, noise, threshold, confidence)
    outcome: Outcome
    if high < 1.0 and ratio < line:
        outcome, decided = "regression", (
            f"B is {1 - ratio:.1%} slower than A, beyond the {threshold:.1%} threshold, and the whole "
            f"{confidence:.0%} interval ({low:.3f}-{high:.3f}) lies below 1"
        )
    elif low >= line:
        outcome, decided = "pass", (
            f"B is {_against(ratio)} A, and any drop is smaller than the {threshold:.1%} threshold: the "
            f"{confidence:.0%} interval's low end {low:.3f} is at or above the line {line:.3f}"
        )
    else:
        outcome, decided = "inconclusive", _unsettled(ratio, low, high, noise, threshold, confidence)
    evidence = (
        f"B/A {ratio:.3f} ({confidence:.0%} t interval on the log ratios {low:.3f}-{high:.3f}) over {n} pairs, "
        f"pair noise {noise:.1%} (sd of log B/A)"
    )
    return PairedVerdict(
        outcome=outcome, pairs=n, ratio=ratio, low=low, high=high, confidence=confidence, noise=noise,
        threshold=threshold, detectable_drop=detectable,
        reasons=(decided, evidence, _sensitivity(n, noise, detectable)),
    )


def detectable_drop(
    pairs: int,
    noise: float,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    power: float = DEFAULT_POWER,
) -> float:
    """The smallest true drop (a share: 0.062 is 6.2%) that `judge_pairs` calls a regression with probability >= power.

    Each pair's log ratio is taken as normal with sd `noise`. Always above the threshold, since
    the rule never calls a drop within it; the threshold itself with no noise (any larger drop
    is called); math.inf when only a drop indistinguishable from 100% would be called.
    ValueError if pairs < 2, noise is not finite and >= 0, threshold or confidence is outside
    (0, 1), or power outside (0.5, 1).
    """
    _check_plan(noise, threshold, confidence, power)
    if pairs < 2:
        raise ValueError(f"at least 2 pairs are needed for an interval, got {pairs}")
    if noise == 0:
        return threshold

    def shortfall(mu: float) -> float:
        return _regression_rate(mu, pairs, noise, threshold, confidence) - power

    # At mu = log(1 - threshold) the rate is below one half (the point alone is below the line
    # half the time), so with power > 0.5 the root lies below it; steps of growing size from
    # there find a bracket in a few tries.
    high = math.log1p(-threshold)
    step = noise / math.sqrt(pairs)
    low = high - step
    while shortfall(low) < 0:
        if low <= _MU_FLOOR:
            return math.inf
        high, step = low, 2 * step
        low = max(low - step, _MU_FLOOR)
    mu = optimize.brentq(shortfall, low, high, xtol=_MU_TOLERANCE)
    return -math.expm1(mu)


def pairs_needed(
    noise: float,
    drop: float,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    power: float = DEFAULT_POWER,
) -> int | None:
    """The fewest pairs at which `drop` is detectable: `detectable_drop(pairs, noise, ...) <= drop`.

    None when no number of pairs up to MAX_PAIRS is enough, which includes every drop at or
    within the threshold. ValueError if drop is outside (0, 1), or on the arguments
    `detectable_drop` refuses.
    """
    _check_plan(noise, threshold, confidence, power)
    if not 0 < drop < 1:
        raise ValueError(f"drop must be a share in (0, 1), got {drop}")
    if drop <= threshold:
        return None
    if noise == 0:
        return 2
    mu = math.log1p(-drop)
    return _fewest_pairs(lambda n: _regression_rate(mu, n, noise, threshold, confidence) >= power)


def _unsettled(
    ratio: float, low: float, high: float, noise: float, threshold: float, confidence: float
) -> str:
    """The inconclusive reason: what the interval leaves open, and the pairs that would likely settle it."""
    line = 1.0 - threshold
    if ratio < line:
        what = (f"B is {1 - ratio:.1%} slower than A, beyond the {threshold:.1%} threshold, but the "
                f"{confidence:.0%} interval reaches {high:.3f}, not below 1")
        needed = pairs_needed(noise, 1 - ratio, threshold, confidence)
        settles = "a drop this size shows as a regression"
    else:
        what = (f"B is {_against(ratio)} A, but the {confidence:.0%} interval reaches {low:.3f}, "
                f"below the line {line:.3f}")
        needed = _pairs_to_pass(ratio, noise, threshold, confidence)
        settles = "a ratio this size shows as a pass"
    if needed is None:
        return f"{what}; at the observed noise no number of pairs up to {MAX_PAIRS:,} settles it"
    return (f"{what}; run more pairs: at the observed noise ({noise:.1%}) {settles} "
            f"{DEFAULT_POWER:.0%} of the time with {needed} pairs")


def _sensitivity(pairs: int, noise: float, detectable: float) -> str:
    if math.isinf(detectable):
        return f"at {pairs} pairs and the observed noise no drop short of 100% is reliably called"
    return (f"at {pairs} pairs and the observed noise, a drop of {detectable:.1%} is called a regression "
            f"{DEFAULT_POWER:.0%} of the time")


def _against(ratio: float) -> str:
    if ratio < 1:
        return f"{1 - ratio:.1%} slower than"
    if ratio > 1:
        return f"{ratio - 1:.1%} faster than"
    return "as fast as"


def _pairs_to_pass(ratio: float, noise: float, threshold: float, confidence: float) -> int | None:
    """The fewest pairs at which a true ratio `ratio` passes with probability >= DEFAULT_POWER."""
    mu = math.log(ratio)
    return _fewest_pairs(lambda n: _pass_rate(mu, n, noise, threshold, confidence) >= DEFAULT_POWER)


def _fewest_pairs(enough: Callable[[int], bool]) -> int | None:
    """The fewest pairs in [2, MAX_PAIRS] for which `enough` holds, given it stays true once true."""
    high = 2
    while not enough(high):
        if high >= MAX_PAIRS:
            return None
        high = min(2 * high, MAX_PAIRS)
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


def _regression_rate(mu: float, pairs: int, noise: float, threshold: float, confidence: float) -> float:
    """P(regression) when the log ratios are N(mu, noise^2): P(mean < min(-t sd / sqrt(n), log(1 - threshold)))."""
    spread, t, scale = _spread_quantiles(pairs), _t_quantile(pairs, confidence), math.sqrt(pairs) / noise
    below = np.minimum(-t * spread, math.log1p(-threshold) * scale)
    return float(np.mean(special.ndtr(below - mu * scale)))


def _pass_rate(mu: float, pairs: int, noise: float, threshold: float, confidence: float) -> float:
    """P(pass) when the log ratios are N(mu, noise^2): P(mean - t sd / sqrt(n) >= log(1 - threshold))."""
    spread, t, scale = _spread_quantiles(pairs), _t_quantile(pairs, confidence), math.sqrt(pairs) / noise
    return float(np.mean(special.ndtr((mu - math.log1p(-threshold)) * scale - t * spread)))


@lru_cache(maxsize=256)
def _spread_quantiles(pairs: int) -> FloatArray:
    """sd(d) / noise at the midpoints of _GRID equal slices of its distribution (sqrt of chi2(n-1) / (n-1))."""
    freedom = pairs - 1
    upper = 1.0 - (np.arange(_GRID, dtype=np.float64) + 0.5) / _GRID
    spread: FloatArray = np.sqrt(special.chdtri(freedom, upper) / freedom)
    # Cached and shared: keep callers from changing it.
    spread.flags.writeable = False
    return spread


def _t_quantile(pairs: int, confidence: float) -> float:
    return float(special.stdtrit(pairs - 1, (1.0 + confidence) / 2.0))


def _log_ratios(a: Sequence[float], b: Sequence[float]) -> FloatArray:
    base, candidate = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if base.ndim != 1 or base.shape != candidate.shape:
        raise ValueError(f"A and B must be paired 1-D sequences of one length, got shapes {base.shape} and "
                         f"{candidate.shape}")
    if base.size < 2:
        raise ValueError(f"at least 2 pairs are needed for an interval, got {base.size}")
    for side, values in (("A", base), ("B", candidate)):
        if not np.all(np.isfinite(values) & (values > 0)):
            raise ValueError(f"{side}'s values must be finite and > 0: {values.tolist()}")
    d: FloatArray = np.log(candidate / base)
    return d


def _check_rule(threshold: float, confidence: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be a share in (0, 1), got {threshold}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _check_plan(noise: float, threshold: float, confidence: float, power: float) -> None:
    _check_rule(threshold, confidence)
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite sd >= 0, got {noise}")
    # Below one half a drop would count as detectable while the rule misses it more often than it calls it.
    if not 0.5 < power < 1:
        raise ValueError(f"power must be in (0.5, 1), got {power}")
