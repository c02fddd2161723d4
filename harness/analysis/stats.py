"""Point estimates and intervals for repeated benchmark cells whose stated coverage is true; pure, no I/O.

A cell is one system at one workload, run a few times (3 by default); its values are
throughputs in tok/s. Every interval here says how often it holds the true value, and
that figure is exact under its stated assumption, not a nominal 95% that three values
cannot give (tests/harness/analysis/test_stats.py checks each by simulation):

- A cell's median: the interval between two order statistics, [x_(k), x_(n+1-k)], which
  holds the true median with probability 1 - 2 P(Bin(n, 1/2) < k) whatever the
  distribution. k is the largest whose coverage reaches the confidence asked; below 6
  values none does at 95%, and the interval is the range with its real coverage (75% at
  3 values, 88% at 4, 94% at 5), which `Estimate.coverage` carries and the report prints.
- A ratio of two systems paired by repetition (run back to back, so the pair cancels the
  drift they share): the geometric mean of the pair ratios with Student's t interval on
  their logs, exact when the log ratios are normal (throughput noise is multiplicative).
- Unpaired (runs not interleaved, and the gate's candidate against its baseline): the ratio
  of medians, so that one disturbed run does not move it, with a two-sample bootstrap
  interval that claims no coverage (none is known at a few values a side), and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point with its interval over `n` values, and how often such an interval holds the true value."""

    point: float
    low: float
    high: float
    n: int
    method: str
    # The probability that an interval made this way holds the true value (exact under `method`'s
    # assumption); nan where there is no interval.
    coverage: float = math.nan
    # Half the range of the values it was made from (runs, or pair ratios) over the point: how
    # closely the repetitions repeat, which the verdicts judge (harness.analysis.health); nan
    # where the values are not at hand (an unpaired ratio).
    spread: float = math.nan

    @property
    def half_width_rel(self) -> float:
        """Half the interval's width relative to the point; nan if the point is 0 or not finite."""
        if self.point == 0 or not math.isfinite(self.point):
            return math.nan
        return (self.high - self.low) / 2 / self.point

    @property
    def repeat_spread(self) -> float:
        """`spread` where known, else the interval's half-width relative to the point."""
        return self.spread if math.isfinite(self.spread) else self.half_width_rel

    @property
    def interval_label(self) -> str:
        """What the interval is, as a reader needs it: "95% interval", or "range (75%)" where it is the range."""
        if not math.isfinite(self.coverage):
            return "no interval" if self.low == self.high else "interval, coverage not known"
        share = f"{self.coverage:.0%}" if round(self.coverage, 2) == round(self.coverage, 4) else f"{self.coverage:.1%}"
        return f"range ({share})" if "range" in self.method else f"{share} interval"

    def contains(self, x: float) -> bool:
        """Whether x lies in the closed interval [low, high]."""
        return self.low <= x <= self.high


def _sample(values: npt.ArrayLike, *, positive: bool = False) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"expected a non-empty 1-D sequence of values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"values must be finite: {arr.tolist()}")
    if positive and not np.all(arr > 0):
        raise ValueError(f"values must be > 0: {arr.tolist()}")
    return arr


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def order_statistic_coverage(n: int, k: int) -> float:
    """The probability that [x_(k), x_(n+1-k)] of n independent values holds their distribution's median."""
    if not 1 <= k <= (n + 1) // 2:
        raise ValueError(f"k must lie in [1, {(n + 1) // 2}] for n = {n}, got {k}")
    return float(1.0 - 2.0 * sps.binom.cdf(k - 1, n, 0.5))


def median_ci(values: npt.ArrayLike, confidence: float = DEFAULT_CONFIDENCE) -> Estimate:
    """Median of `values` with a distribution-free order-statistic interval and its exact coverage.

    The narrowest [x_(k), x_(n+1-k)] whose coverage reaches `confidence`; with too few
    values for any, the range, whose coverage (below `confidence`) is what `coverage` says.
    One value: no interval. ValueError if `values` is empty or holds a non-finite value.
    """
    _check_confidence(confidence)
    arr = np.sort(_sample(values))
    point, n = float(np.median(arr)), int(arr.size)
    if n == 1:
        return Estimate(point, point, point, n, "single value, no interval", spread=0.0)
    k = max((k for k in range(1, (n + 1) // 2 + 1) if order_statistic_coverage(n, k) >= confidence), default=1)
    coverage = order_statistic_coverage(n, k)
    low, high = float(arr[k - 1]), float(arr[n - k])
    spread = _spread(arr, point)
    if k == 1:
        return Estimate(point, low, high, n, f"range of {n} values", coverage, spread)
    return Estimate(point, low, high, n, f"order statistics {k} and {n + 1 - k} of {n}", coverage, spread)


def _spread(values: FloatArray, point: float) -> float:
    return float(values.max() - values.min()) / 2 / point if point != 0 else math.nan


def paired_ratio_ci(
    numerators: npt.ArrayLike, denominators: npt.ArrayLike, confidence: float = DEFAULT_CONFIDENCE
) -> Estimate:
    """Geometric mean of the pair ratios a_r / b_r, with Student's t interval on log(a_r / b_r).

    Repetition r of each side ran back to back, so each ratio cancels drift common to the
    pair. One pair: no interval. ValueError if the lengths differ, or a side is empty or
    holds a value that is not finite and > 0.
    """
    _check_confidence(confidence)
    a, b = _sample(numerators, positive=True), _sample(denominators, positive=True)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    logs, n = np.log(a / b), int(a.size)
    if n == 1:
        point = math.exp(float(logs[0]))
        return Estimate(point, point, point, n, "paired ratio, single pair, no interval", spread=0.0)
    mean = float(logs.mean())
    half = float(sps.t.ppf((1 + confidence) / 2, n - 1)) * float(logs.std(ddof=1)) / math.sqrt(n)
    point = math.exp(mean)
    return Estimate(point, math.exp(mean - half), math.exp(mean + half), n,
                    "paired ratios, geometric mean, t interval on the log ratios", confidence, _spread(a / b, point))


def _ratio_of_medians(a: FloatArray, b: FloatArray, axis: int = -1) -> FloatArray:
    return np.asarray(np.median(a, axis=axis) / np.median(b, axis=axis), dtype=np.float64)


def unpaired_ratio_ci(
    numerators: npt.ArrayLike, denominators: npt.ArrayLike, resamples: int = 9999, seed: int = 0
) -> Estimate:
    """median(a) / median(b) with a two-sample bootstrap percentile interval (lengths may differ).

    Medians, so that one disturbed run does not move the figure (the gate's ratio). The
    interval claims no coverage: at a handful of values a side a percentile bootstrap
    covers less than its nominal level, and nothing gives its true one. If either side has
    fewer than three values or no spread, the interval is [min(a)/max(b), max(a)/min(b)].
    `n` is the smaller side's count. ValueError as in `paired_ratio_ci`, except that the
    lengths may differ.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    a, b = _sample(numerators, positive=True), _sample(denominators, positive=True)
    point, n = float(np.median(a) / np.median(b)), int(min(a.size, b.size))
    bounds = float(a.min() / b.max()), float(a.max() / b.min())
    if min(a.size, b.size) < 3 or a.min() == a.max() or b.min() == b.max():
        return Estimate(point, *bounds, n, "ratio of medians, extreme-value bounds")
    res = sps.bootstrap(
        (a, b), _ratio_of_medians, confidence_level=DEFAULT_CONFIDENCE, n_resamples=resamples,
        method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    # Every resampled ratio lies within the bounds; scipy's interpolation can land an ulp outside.
    low, high = (min(max(float(value), bounds[0]), bounds[1]) for value in (ci.low, ci.high))
    return Estimate(point, low, high, n, f"ratio of medians, bootstrap percentile, {resamples} resamples")


def relative_spread(values: npt.ArrayLike) -> float:
    """(max - min) / median; 0.0 for a single value, nan if the median is 0."""
    arr = _sample(values)
    median = float(np.median(arr))
    if arr.size == 1:
        return 0.0
    return float(arr.max() - arr.min()) / median if median != 0 else math.nan


def coefficient_of_variation(values: npt.ArrayLike) -> float:
    """Sample standard deviation (ddof=1) over the mean; 0.0 for a single value, nan if the mean is 0."""
    arr = _sample(values)
    mean = float(arr.mean())
    if arr.size == 1:
        return 0.0
    return float(arr.std(ddof=1)) / mean if mean != 0 else math.nan
