"""A system's latency against offered rate, and what to read off it (pure).

Both are read the same way: each point gets a ratio to its limit (above 1: past it), and
the rate is where that ratio crosses 1, interpolated linearly between the last rate at or
below 1 and the first above. Rates after the first crossing do not count, even if a later
run happens to pass. A queue that did not keep up is always past the limit: its growth
over its limit (RatePoint.growth_ratio) is one of the ratios.

- The knee: where the median normalized latency (E2E per output token) reaches
  KNEE_FACTOR times its value at the lowest rate, or the queue stops keeping up, whichever
  comes first. Normalized, because each rate's plan draws its own output lengths, and the
  median E2E of one run moves with them; read at one machine speed (each run's figure over
  its steps' speed against the fit on the other runs, where known), because the machine's
  speed moves from run to run and the load's effect is what the knee is for
  (docs/validation/rate-sweep.md). Below it, more load costs a request little; above it, the
  queue sets the latency. None when the grid never crosses.
- The rate held under an SLO: where the worst of p50 TTFT / its target, p99 E2E / its
  target and the queue's growth ratio crosses 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.rate_sweep.point import RatePoint

KNEE_FACTOR = 2.0


@dataclass(frozen=True)
class SloSeconds:
    """Latency targets of the rate sweep, seconds."""

    ttft_p50_s: float
    e2e_p99_s: float

    def describe(self) -> str:
        return f"p50 TTFT <= {self.ttft_p50_s:g} s and p99 E2E <= {self.e2e_p99_s:g} s"


@dataclass(frozen=True)
class HeldRate:
    """The highest offered rate held under the SLO, and how the grid bounds it."""

    rate: float  # NaN when even the lowest rate fails
    bound: str  # "interpolated", "below the grid" (the lowest rate fails) or "at least" (the grid's top holds)


def knee_rate(points: Sequence[RatePoint]) -> float | None:
    """Where the median normalized latency at one machine speed reaches KNEE_FACTOR x its lowest-rate value or
    the queue grows (None: not within the grid)."""
    ordered = sorted(points, key=lambda point: point.offered_rate)
    ratio = _knee_ratio(ordered)
    if ratio is None:
        return None
    knee = _first_crossing(ordered, ratio)
    # A queue that already grew at the lowest rate: the knee is at or below it.
    return ordered[0].offered_rate if knee is not None and math.isnan(knee) else knee


def held_rate(points: Sequence[RatePoint], slo: SloSeconds) -> HeldRate:
    """The highest offered rate at which the system keeps up and meets `slo`."""
    ordered = sorted(points, key=lambda point: point.offered_rate)
    if not ordered:
        return HeldRate(math.nan, "below the grid")
    rate = _first_crossing(ordered, _held_ratio(slo))
    if rate is None:
        return HeldRate(ordered[-1].offered_rate, "at least")
    if math.isnan(rate):
        return HeldRate(math.nan, "below the grid")
    return HeldRate(rate, "interpolated")


def knee_bracket(points: Sequence[RatePoint]) -> tuple[float, float] | None:
    """The two run rates the knee lies between (None: not within the grid, or at or below its lowest rate)."""
    ordered = sorted(points, key=lambda point: point.offered_rate)
    ratio = _knee_ratio(ordered)
    return _rates(_bracket(ordered, ratio)) if ratio is not None else None


def held_bracket(points: Sequence[RatePoint], slo: SloSeconds) -> tuple[float, float] | None:
    """The two run rates the rate held under `slo` lies between (None: not within the grid, or below it)."""
    return _rates(_bracket(sorted(points, key=lambda point: point.offered_rate), _held_ratio(slo)))


def _rates(pair: tuple[RatePoint, RatePoint] | None) -> tuple[float, float] | None:
    return (pair[0].offered_rate, pair[1].offered_rate) if pair is not None else None


def slo_ratio(point: RatePoint, slo: SloSeconds) -> float:
    """The worst of the point's figures over its target (<= 1: the SLO is met; NaN counts as missed)."""
    ratios = (point.ttft_p50_s / slo.ttft_p50_s, point.e2e_p99_s / slo.e2e_p99_s)
    return max(ratio if math.isfinite(ratio) else math.inf for ratio in ratios)


def _knee_ratio(ordered: Sequence[RatePoint]) -> Callable[[RatePoint], float] | None:
    """A point's distance to the knee (above 1: past it); None when the lowest rate gives no reference."""
    if len(ordered) < 2 or not math.isfinite(ordered[0].normalized_at_fit_speed_s):
        return None
    limit = KNEE_FACTOR * ordered[0].normalized_at_fit_speed_s
    return lambda point: max(point.normalized_at_fit_speed_s / limit, point.growth_ratio)


def _held_ratio(slo: SloSeconds) -> Callable[[RatePoint], float]:
    """A point's distance to the SLO or to falling behind, whichever is nearer (above 1: past it)."""
    return lambda point: max(slo_ratio(point, slo), point.growth_ratio)


def _first_crossing(ordered: Sequence[RatePoint], ratio: Callable[[RatePoint], float]) -> float | None:
    """Where `ratio` first crosses 1 over the rate-ordered points: None if never, NaN if already at the first."""
    if not ordered:
        return None
    if not ratio(ordered[0]) <= 1:  # NaN counts as past the limit
        return math.nan
    pair = _bracket(ordered, ratio)
    if pair is None:
        return None
    below, above = pair
    return _crossing(below.offered_rate, ratio(below), above.offered_rate, ratio(above), 1.0)


def _bracket(ordered: Sequence[RatePoint],
             ratio: Callable[[RatePoint], float]) -> tuple[RatePoint, RatePoint] | None:
    """The last point at or below 1 and the first past it (None: no such pair)."""
    previous: RatePoint | None = None
    for point in ordered:
        if not ratio(point) <= 1:  # NaN counts as past the limit
            return (previous, point) if previous is not None else None
        previous = point
    return None


def _crossing(x0: float, y0: float, x1: float, y1: float, level: float) -> float:
    """Where the segment (x0, y0)-(x1, y1) reaches `level` (y0 <= level < y1), linearly; x1 if y1 is not finite."""
    if not math.isfinite(y1) or y1 == y0:
        return x1
    return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
