"""Point estimates and 95% intervals for repeated benchmark cells; pure, no I/O.

A cell is one system at one workload, run a few times (n >= 3); its values are
throughputs in tok/s. The point is the median and the interval a bootstrap percentile
CI of the median (`scipy.stats.bootstrap`, fixed seed, so reports are reproducible):
with so few runs nothing justifies a normal-theory interval, the median shrugs off one
disturbed run, and a percentile interval never leaves the observed values. It is
coarse at small n: for n <= 5 it comes out as [min, max], which holds the true median
with probability 1 - 2 / 2**n (75% at n = 3, 94% at n = 5). Ratios between systems use
per-pair ratios when repetitions were interleaved (pairing cancels drift), otherwise
the ratio of medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    """A median with its confidence interval over `n` values."""

    point: float
    low: float
    high: float
    n: int
    method: str

    @property
    def half_width_rel(self) -> float:
        """Half the interval's width relative to the point; nan if the point is 0 or not finite."""
        if self.point == 0 or not math.isfinite(self.point):
            return math.nan
        return (self.high - self.low) / 2 / self.point

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


def _check_params(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def _clamped(low: float, high: float, lo: float, hi: float) -> tuple[float, float]:
    # Every resampled statistic lies in [lo, hi]; scipy's quantile interpolation can
    # still land an ulp outside, which would put a bound beyond any observed value.
    return min(max(low, lo), hi), min(max(high, lo), hi)


def _median_estimate(arr: FloatArray, confidence: float, resamples: int, seed: int, label: str) -> Estimate:
    _check_params(confidence, resamples)
    point, n = float(np.median(arr)), int(arr.size)
    lo, hi = float(arr.min()), float(arr.max())
    if n == 1:
        return Estimate(point, point, point, n, f"{label}single value, no interval")
    if lo == hi:
        # Every resample is the same value; skip scipy rather than resample a constant.
        return Estimate(point, point, point, n, f"{label}all values equal, no spread")
    if n == 2:
        # The bootstrap of two values only ever sees them and their mean: report the range.
        return Estimate(point, lo, hi, n, f"{label}two values, range")
    res = sps.bootstrap(
        (arr,), np.median, confidence_level=confidence, n_resamples=resamples,
        method="percentile", vectorized=True, rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    low, high = _clamped(float(ci.low), float(ci.high), lo, hi)
    return Estimate(point, low, high, n, f"{label}bootstrap percentile, {resamples} resamples")


def median_ci(values: npt.ArrayLike, confidence: float = 0.95, resamples: int = 9999, seed: int = 0) -> Estimate:
    """Median of `values` with a bootstrap percentile CI (deterministic for a given seed).

    n == 1 gives a zero-width interval, n == 2 the range [min, max]. ValueError if
    `values` is empty or holds a non-finite value.
    """
    return _median_estimate(_sample(values), confidence, resamples, seed, "")


def paired_ratio_ci(
    numerators: npt.ArrayLike,
    denominators: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 9999,
    seed: int = 0,
) -> Estimate:
    """Median of the per-pair ratios a_r / b_r with a bootstrap percentile CI.

    Repetition r of each side ran back to back, so each ratio cancels drift common to
    the pair. ValueError if the lengths differ, or a side is empty or holds a value
    that is not finite and > 0.
    """
    a, b = _sample(numerators, positive=True), _sample(denominators, positive=True)
    if a.size != b.size:
        raise ValueError(f"paired samples differ in length: {a.size} vs {b.size}")
    return _median_estimate(a / b, confidence, resamples, seed, "paired ratios, ")


def _ratio_of_medians(a: FloatArray, b: FloatArray, axis: int = -1) -> FloatArray:
    return np.asarray(np.median(a, axis=axis) / np.median(b, axis=axis), dtype=np.float64)


def unpaired_ratio_ci(
    numerators: npt.ArrayLike,
    denominators: npt.ArrayLike,
    confidence: float = 0.95,
    resamples: int = 9999,
    seed: int = 0,
) -> Estimate:
    """median(a) / median(b) with a two-sample bootstrap percentile CI (lengths may differ).

    If either side has fewer than three values or no spread, the interval is
    [min(a)/max(b), max(a)/min(b)], which is conservative. `n` is the smaller side's
    count. ValueError as in `paired_ratio_ci`, except that the lengths may differ.
    """
    _check_params(confidence, resamples)
    a, b = _sample(numerators, positive=True), _sample(denominators, positive=True)
    point, n = float(np.median(a) / np.median(b)), int(min(a.size, b.size))
    if min(a.size, b.size) < 3 or a.min() == a.max() or b.min() == b.max():
        low, high = float(a.min() / b.max()), float(a.max() / b.min())
        return Estimate(point, low, high, n, "ratio of medians, extreme-value bounds")
    res = sps.bootstrap(
        (a, b), _ratio_of_medians, confidence_level=confidence, n_resamples=resamples,
        method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    low, high = _clamped(float(ci.low), float(ci.high), float(a.min() / b.max()), float(a.max() / b.min()))
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
