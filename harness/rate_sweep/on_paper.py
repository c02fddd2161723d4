"""A GPU setup's latency curve on paper: the rate sweep without a server.

Each rate's Poisson plan is scheduled by the GPU engine model (harness.paper.gpu_predict,
block by block, with the setup's sourced constants) for continuous and for static at B,
and each request's simulated arrival, admission, first token and finish are read as a
measured run's would be (harness.rate_sweep.point.latency_point): the same warm-up left
out, the same percentiles, the same test of whether the queue kept up. Saturation is a
burst of SATURATION_REQUESTS on paper, read as the sweep reads its measured burst. The
knee and the rate held under the SLO come from the same curve functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.paper.gpu_predict import engine_limits, predict_arrivals, setup_step_cost
from harness.paper.gpu_schedule import EngineSchedule, simulate_engine
from harness.paper.gpu_setups import GpuSetup
from harness.rate_sweep.curve import SloSeconds
from harness.rate_sweep.defaults import WARMUP_S
from harness.rate_sweep.grid import SATURATION_QUANTILE, burst_spec, rate_spec
from harness.rate_sweep.point import RatePoint, RequestLatencies, latency_point
from harness.rate_sweep.result import SystemResult, system_result
from harness.report.document import Block, Bullets, Heading, Paragraph, Table
from harness.report.format import num, times, with_low
from harness.systems import Mode
from harness.workload import WorkloadSpec, build_plan

# Requests in the saturation burst, as sweep-rates sends (its --saturation-requests default).
SATURATION_REQUESTS = 200
# Arrivals measured per rate: a minute, and at least this many requests at low rates,
# so that the queue's growth is read from enough of them. Simulated time costs nothing.
PAPER_MEASURE_S = 60.0
MIN_MEASURED_REQUESTS = 200
SYSTEMS: tuple[Mode, ...] = ("continuous", "static")


@dataclass(frozen=True)
class PaperCurves:
    """A setup's latency curves on paper, per system, and how they were made."""

    setup: GpuSetup
    workload: str
    batch_size: int
    static_batch_wait_s: float
    slo: SloSeconds
    systems: tuple[SystemResult, ...]

    def system(self, name: str) -> SystemResult:
        return next(result for result in self.systems if result.system == name)

    def held_ratio_text(self) -> str:
        """Continuous's rate held under the SLO over static's, with its bound when either is off the grid."""
        continuous, static = self.system("continuous").held, self.system("static").held
        if continuous.bound == "below the grid":
            return "no ratio: continuous misses the SLO at the grid's lowest rate"
        if static.bound == "below the grid":
            lowest = min(point.offered_rate for point in self.system("static").points)
            return (f"more than {times(continuous.rate / lowest)}, as static misses the SLO at the grid's lowest rate"
                    f" ({num(lowest)} requests/s; lower --rates find the rate it holds)")
        prefix = "at least " if continuous.bound == "at least" and static.bound != "at least" else ""
        suffix = " (both hold the grid's top rate)" if continuous.bound == static.bound == "at least" else ""
        return f"{prefix}{times(continuous.rate / static.rate)}{suffix}"


def predict_curves(setup: GpuSetup, spec: WorkloadSpec, rates: Sequence[float], slo: SloSeconds,
                   batch_size: int | None = None, static_batch_wait_s: float = 0.0) -> PaperCurves:
    """Continuous's and static's latency at each of `rates` (requests/s) on `setup`, on paper.

    `spec` is a Poisson workload; its published settings on `setup` give the token budget
    and static's B (`batch_size` overrides B). ValueError for a burst workload, or requests
    that cannot fit the engine.
    """
    if spec.arrival.kind == "burst":
        raise ValueError(f"{spec.name}: a latency curve needs arrivals over time, not a burst")
    settings = setup.settings(spec.name)
    width = batch_size or settings.batch_size
    points: dict[str, list[RatePoint]] = {system: [] for system in SYSTEMS}
    for rate in sorted(rates):
        measure_s = max(PAPER_MEASURE_S, MIN_MEASURED_REQUESTS / rate)
        arrivals = predict_arrivals(setup, rate_spec(spec, rate, WARMUP_S, measure_s), settings, width,
                                    static_batch_wait_s)
        for schedule in (arrivals.continuous, arrivals.static):
            points[schedule.system].append(_point(schedule, rate, measure_s))
    burst = build_plan(burst_spec(spec, SATURATION_REQUESTS)).to_frame()
    prompts, outputs = burst["prompt_tokens"].to_numpy(), burst["output_tokens"].to_numpy()
    systems = []
    for system in SYSTEMS:
        schedule = simulate_engine(system, prompts, outputs, engine_limits(setup, settings, system, width),
                                   setup_step_cost(setup))
        systems.append(system_result(system, _saturation(schedule), points[system], slo))
    return PaperCurves(setup, spec.name, width, static_batch_wait_s, slo, tuple(systems))


def curve_blocks(curves: PaperCurves) -> list[Block]:
    """The curves as report blocks: the held rates first, then every rate, then how they were made."""
    return [
        Heading(f"{curves.workload} on {curves.setup.key}, on paper", 2),
        Paragraph(f"Under the SLO ({curves.slo.describe()}), continuous batching holds"
                  f" {_held(curves.systems[0])} requests/s and static batching at B = {curves.batch_size}"
                  f" {_held(curves.systems[1])}: {curves.held_ratio_text()}."),
        Table(("system", "saturation (req/s)", "knee (req/s)", "held under SLO (req/s)"),
              tuple((s.system, num(s.saturation_rps), _knee(s), _held(s)) for s in curves.systems)),
        Table(("system", "offered (req/s)", "requests", "p50 TTFT (s)", "p99 TTFT (s)", "p50 E2E (s)", "p99 E2E (s)",
               "p50 queue (s)", "queue growth (s) [95% low]", "kept up"),
              tuple((s.system, num(p.offered_rate), str(p.measured), num(p.ttft_p50_s), num(p.ttft_p99_s),
                     num(p.e2e_p50_s), num(p.e2e_p99_s), num(p.queue_wait_p50_s),
                     with_low(p.wait_growth_s, p.wait_growth_low_s),
                     "yes" if p.keeps_up else "**no**") for s in curves.systems for p in s.points)),
        Bullets((
            f"Scheduled by the engine model of `batchbench predict` (the setup's sourced constants, KV blocks,"
            f" token budget {_budget(curves)}), each rate's Poisson plan with {WARMUP_S:g} s of warm-up left out"
            f" and at least {PAPER_MEASURE_S:g} s or {MIN_MEASURED_REQUESTS} requests measured.",
            f"Static batching: a batch of up to {curves.batch_size} forms only when the previous one has finished,"
            f" {_wait(curves.static_batch_wait_s)}.",
            "Latencies are the engine's: arrival to first token and to last token. No HTTP server, client or"
            " network is in them.",
            f"Saturation: a burst of {SATURATION_REQUESTS} requests, served up to its"
            f" {SATURATION_QUANTILE:.0%} finish. Knee and held rate as in the rate sweep (docs/rate-sweep.md).",
        )),
    ]


def _point(schedule: EngineSchedule, rate: float, measure_s: float) -> RatePoint:
    measured = schedule.arrival_s >= WARMUP_S
    arrival = schedule.arrival_s[measured]
    requests = RequestLatencies(
        arrival_s=arrival,
        ttft_s=schedule.first_token_s[measured] - arrival,
        e2e_s=schedule.finish_s[measured] - arrival,
        output_tokens=schedule.output_lengths[measured].astype(float),
        queue_wait_s=schedule.admitted_s[measured] - arrival,
    )
    span = float(arrival.max() - arrival.min()) if len(arrival) > 1 else 0.0
    planned = (len(arrival) - 1) / span if span > 0 else math.nan
    return latency_point(schedule.system, rate, requests, measure_s, planned_rate=planned, sent_rate=planned,
                         late_p99_s=0.0, measured=len(arrival), failed=0)


def _saturation(schedule: EngineSchedule) -> float:
    """Requests per second up to the burst's SATURATION_QUANTILE finish (as grid.saturation_rate reads a run)."""
    ends = np.sort(schedule.finish_s)
    count = max(1, math.ceil(SATURATION_QUANTILE * len(ends)))
    return count / float(ends[count - 1])


def _knee(result: SystemResult) -> str:
    if result.knee_rps is None:
        return "beyond the grid"
    lowest = result.points[0]
    # knee_rate gives the lowest rate when the queue already grew there: the knee is at or below it.
    return f"<= {num(lowest.offered_rate)}" if not lowest.keeps_up else num(result.knee_rps)


def _held(result: SystemResult) -> str:
    if result.held.bound == "below the grid":
        return "none of the grid's rates"
    return (">= " if result.held.bound == "at least" else "") + num(result.held.rate)


def _budget(curves: PaperCurves) -> str:
    settings = curves.setup.settings(curves.workload)
    return str(settings.max_num_batched_tokens or int(curves.setup.max_num_batched_tokens.value))


def _wait(wait_s: float) -> str:
    if wait_s == 0:
        return "of whoever waits (impatient, as Anyscale's static policy in their latency runs)"
    return f"once B requests wait or the oldest has waited {wait_s:g} s"
