"""Change points across nights, from Apache Otava (Hunter's E-divisive means); pure, no I/O.

Otava is what MongoDB built for exactly this: a history of nightly figures, noisy,
with occasional real shifts. Its `compute_change_points` splits the series where the
mean before and after differ significantly (a t-test after an E-divisive split over
sliding windows), so a lone bad night is not a change and a lasting step is. Only
`otava.analysis` is used; it needs numpy and scipy, which is why the lock installs
the package without its declared service clients (BigQuery, Postgres, Slack).

Otava is not among pyproject's dependencies: its metadata pins numpy 2.2 and scipy < 1.17,
which this project's pins exclude, so declaring it would make every resolving
`pip install` of the package fail. It runs on our pins (tests/harness/nightly);
`require_otava` names the one command that installs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import UsageError

OTAVA_MISSING = ("nightly needs Apache Otava for its change points: pip install --no-deps apache-otava==0.8.0"
                 " (its metadata pins numpy 2.2, which batchbench's pins exclude; it runs on them)")
# Otava's own default significance; a window of 30 nights is a month of history.
MAX_PVALUE = 0.001
WINDOW_NIGHTS = 30
# Fewer nights than this hold no change Otava can show at MAX_PVALUE.
MIN_NIGHTS = 6


@dataclass(frozen=True)
class ChangePoint:
    """The series moved at `index` (the first night after the change)."""

    index: int
    before: float
    after: float
    pvalue: float

    @property
    def change(self) -> float:
        """Relative change of the mean, after over before, minus 1."""
        return self.after / self.before - 1 if self.before else math.nan


def _otava_change_points() -> Callable[..., Any]:
    """Otava's `compute_change_points`; UsageError naming the install command when Otava is missing."""
    try:
        from otava.analysis import compute_change_points
    except ImportError as missing:
        raise UsageError(OTAVA_MISSING) from missing
    return compute_change_points


def require_otava() -> None:
    """UsageError naming the install command when Otava is missing; a night checks before it runs."""
    _otava_change_points()


def change_points(values: Sequence[float], max_pvalue: float = MAX_PVALUE) -> list[ChangePoint]:
    """Where a nightly series (one figure per night, oldest first) shifted, per Otava."""
    compute_change_points = _otava_change_points()
    if any(not math.isfinite(value) for value in values):
        raise ValueError(f"nightly values must be finite: {list(values)}")
    if len(values) < MIN_NIGHTS:
        return []
    found, _ = compute_change_points(list(values), window_len=WINDOW_NIGHTS, max_pvalue=max_pvalue)
    return [ChangePoint(int(point.index), float(point.stats.mean_1), float(point.stats.mean_2),
                        float(point.stats.pvalue)) for point in found]
