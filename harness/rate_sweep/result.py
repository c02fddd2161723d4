"""A rate sweep's findings: per system its saturation, points, knee and rate held under the SLO (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.rate_sweep.curve import HeldRate, SloSeconds, held_rate, knee_rate
from harness.rate_sweep.point import RatePoint

# Static batching, kept by the server (its scheduler plugin) or by the client's waves.
STATIC_SYSTEMS = ("static", "client-static")


@dataclass(frozen=True)
class SystemResult:
    """One system's curve and what is read off it."""

    system: str
    saturation_rps: float  # from its burst (harness.rate_sweep.grid.saturation_rate)
    points: tuple[RatePoint, ...]
    knee_rps: float | None
    held: HeldRate


@dataclass(frozen=True)
class ScheduleSettings:
    """How the grid adapted to the runs (harness.rate_sweep.schedule). All 0: every system ran every grid rate and
    nothing else, as sweeps written before the schedule did."""

    fell_behind_runs: int = 0
    extra_rates: int = 0
    refine_runs: int = 0


@dataclass(frozen=True)
class SweepSettings:
    """How the sweep ran: stated in the report and summary.json."""

    workload: str
    batch_size: int
    slo: SloSeconds
    warmup_s: float
    measure_s: float
    # The max batch delay of the static server launched, or of client-static's waves; None: neither was swept.
    static_batch_wait_s: float | None
    decode_step_ms: float  # the continuous engine's median decode step at a full batch; NaN unknown
    schedule: ScheduleSettings = ScheduleSettings()
    trace: str | None = None  # the trace file whose arrivals were scaled to each rate; None: Poisson arrivals
    # Whether any run kept an engine step log; False (a server batchbench did not launch): every figure is the client's.
    engine_steps: bool = True
    # The model with its shape and the server build on its machine (harness.report.setup.stack_lines).
    stack: tuple[str, ...] = ()


@dataclass(frozen=True)
class RateSweepResult:
    """Everything the rate sweep's report shows."""

    settings: SweepSettings
    systems: tuple[SystemResult, ...]
    cdf_rate: float | None = None  # the rate the CDFs were drawn at
    cdf_e2e: Mapping[str, np.ndarray] = field(default_factory=dict)
    # "UNTESTED VLLM ..." of each server run on a vLLM outside the tested releases (harness.rundir.manifest).
    untested_vllm: tuple[str, ...] = ()

    def system(self, name: str) -> SystemResult | None:
        return next((result for result in self.systems if result.system == name), None)

    @property
    def static_system(self) -> str | None:
        """The static batching swept: the static server's, else client-static; None: neither."""
        return next((name for name in STATIC_SYSTEMS if self.system(name) is not None), None)

    def held_ratio(self, numerator: str, denominator: str) -> float:
        """Rate held under the SLO by `numerator` over `denominator`'s (NaN when either is unknown)."""
        top, bottom = self.system(numerator), self.system(denominator)
        if top is None or bottom is None or not bottom.held.rate > 0:
            return math.nan
        return top.held.rate / bottom.held.rate

    def knee_ratio(self, numerator: str, denominator: str) -> float:
        """Knee of `numerator` over `denominator`'s (NaN when either is beyond the grid)."""
        top, bottom = self.system(numerator), self.system(denominator)
        if top is None or bottom is None or top.knee_rps is None or not bottom.knee_rps:
            return math.nan
        return top.knee_rps / bottom.knee_rps


def system_result(system: str, saturation_rps: float, points: Sequence[RatePoint], slo: SloSeconds) -> SystemResult:
    """Read the knee and the rate held under `slo` off one system's points."""
    return SystemResult(system, saturation_rps, tuple(sorted(points, key=lambda p: p.offered_rate)),
                        knee_rate(points), held_rate(points, slo))


def cdf_rate(results: Sequence[SystemResult]) -> float | None:
    """The rate to draw the CDFs at: the highest rate every system ran below every system's knee (else the lowest
    rate they all ran)."""
    each = [{point.offered_rate for point in result.points} for result in results]
    rates = sorted(set.intersection(*each)) if each else []
    if not rates:
        return None
    knees = [result.knee_rps for result in results if result.knee_rps is not None]
    below = [rate for rate in rates if not knees or rate < min(knees)]
    return below[-1] if below else rates[0]


def queue_wait_ratio(static: SystemResult, continuous: SystemResult) -> dict[float, float]:
    """Static's median queue wait over continuous's (TTFT's where there is no engine step log), at each rate where
    static's queue grew."""
    theirs = {point.offered_rate: _door_wait(point) for point in continuous.points}
    return {point.offered_rate: _door_wait(point) / theirs[point.offered_rate]
            for point in static.points
            if not point.keeps_up and theirs.get(point.offered_rate, 0) > 0}


def _door_wait(point: RatePoint) -> float:
    """The median wait before the engine took the request up: its queue wait, else (no step log) its TTFT."""
    return point.queue_wait_p50_s if math.isfinite(point.queue_wait_p50_s) else point.ttft_p50_s
