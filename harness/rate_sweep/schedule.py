"""Which runs a rate sweep makes next, from what its runs so far found (pure).

1. The grid: its rates ascending, every system still in the sweep at each, interleaved.
   A system leaves after FELL_BEHIND_RUNS of its runs did not keep up: past that its
   latencies only say how long a run was, and its runs cost the most (the backlog drains
   after the last arrival).
2. Past the grid's top: while a system still in the sweep has not crossed its knee or its
   SLO, the grid grows by EXTRA_RATE_FACTOR, at most `extra_rates` times (a burst's rate
   has read 0.7-1.4x what continuous sustains under Poisson arrivals here).
3. Refinement: each system runs up to `refine_runs` more rates, one round at a time, each
   halfway between the two run rates around its rate held under the SLO (then its knee)
   while they are more than MIN_BRACKET apart. A crossing read across a wide grid step
   moves with which side of a grid rate the machine's state put it on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.rate_sweep.curve import SloSeconds, held_bracket, knee_bracket
from harness.rate_sweep.defaults import EXTRA_RATE_FACTOR, EXTRA_RATES, REFINE_RUNS
from harness.rate_sweep.point import RatePoint

FELL_BEHIND_RUNS = 2
# A bracket whose upper rate is this much above its lower is split (10%: the knee's stated tolerance).
MIN_BRACKET = 0.10


@dataclass
class RateSchedule:
    """The sweep's next runs, each group (system, rate) pairs to run in order; `record` the points after each run."""

    grid: Sequence[float]  # ascending
    systems: Sequence[str]
    slo: SloSeconds
    # Each system's burst rate: where `left` expects it to fall behind (unknown: it runs the whole grid).
    saturations: Mapping[str, float] = field(default_factory=dict)
    extra_rates: int = EXTRA_RATES
    refine_runs: int = REFINE_RUNS
    points: dict[str, list[RatePoint]] = field(default_factory=dict, init=False)
    _next_grid: int = field(default=0, init=False)
    _extra_made: int = field(default=0, init=False)
    _refined: dict[str, int] = field(default_factory=dict, init=False)

    def record(self, points: Sequence[RatePoint]) -> None:
        """Every run's point so far: their figures may be revised as runs come (each run's speed is read against a
        step cost fitted on the others)."""
        self.points = {}
        for point in points:
            self.points.setdefault(point.system, []).append(point)

    def next_runs(self) -> list[tuple[str, float]]:
        """The next group of runs; empty when the sweep is done."""
        while self._next_grid < len(self.grid):
            rate = self.grid[self._next_grid]
            self._next_grid += 1
            group = [(system, rate) for system in self.systems if self.in_sweep(system)]
            if group:
                return group
        if self._extra_made < self.extra_rates:
            uncrossed = [system for system in self.systems if self.in_sweep(system) and not self._crossed(system)]
            if uncrossed:
                self._extra_made += 1
                top = round(max(self._rates()) * EXTRA_RATE_FACTOR, 2)
                return [(system, top) for system in uncrossed]
        refinements = ((system, self._refinement(system)) for system in self.systems)
        return [(system, rate) for system, rate in refinements if rate is not None]

    def in_sweep(self, system: str) -> bool:
        """Whether `system` still runs the grid's rates: fewer than FELL_BEHIND_RUNS of its runs fell behind."""
        return sum(not point.keeps_up for point in self.points.get(system, [])) < FELL_BEHIND_RUNS

    def left(self) -> list[tuple[str, float]]:
        """The runs expected after those made: the grid's rest for each system still in it, up to where it is
        expected to leave, then the refinements (priced at the grid's median rate). Growth past the grid is not
        foreseen."""
        rest = [(system, rate) for rate in self.grid[self._next_grid:] for system in self.systems
                if self.in_sweep(system) and rate <= self._expected_top(system)]
        middle = self.grid[len(self.grid) // 2] if self.grid else 0.0
        refinements = [(system, middle) for system in self.systems
                       for _ in range(self.refine_runs - self._refined.get(system, 0))]
        return rest + refinements

    def _expected_top(self, system: str) -> float:
        """The grid rate at which `system` is expected to have fallen behind FELL_BEHIND_RUNS times: the
        FELL_BEHIND_RUNS-th above its burst's rate (a burst has read 0.7-1.4x what a system sustains here)."""
        saturation = self.saturations.get(system, math.nan)
        above = [rate for rate in self.grid if rate > saturation] if math.isfinite(saturation) else []
        return above[FELL_BEHIND_RUNS - 1] if len(above) >= FELL_BEHIND_RUNS else math.inf

    def _crossed(self, system: str) -> bool:
        points = self.points.get(system, [])
        return knee_bracket(points) is not None and held_bracket(points, self.slo) is not None

    def _rates(self) -> list[float]:
        return [point.offered_rate for points in self.points.values() for point in points] or list(self.grid)

    def _refinement(self, system: str) -> float | None:
        """The rate that halves `system`'s widest-needed bracket (held, then knee); None when none is left to split."""
        if self._refined.get(system, 0) >= self.refine_runs:
            return None
        points = self.points.get(system, [])
        run = {point.offered_rate for point in points}
        for bracket in (held_bracket(points, self.slo), knee_bracket(points)):
            if bracket is None or not bracket[1] > bracket[0] * (1 + MIN_BRACKET):
                continue
            rate = round(math.fsum(bracket) / 2, 2)
            if rate not in run:
                self._refined[system] = self._refined.get(system, 0) + 1
                return rate
        return None
