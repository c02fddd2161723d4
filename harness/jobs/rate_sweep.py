"""The rate sweep: latency against offered rate per system, its knee and the rate held under an SLO.

The latency half of Anyscale's experiment (harness.rate_sweep). Both vLLM servers are
launched as the reproduction launches them (or given as endpoints). Each system first
serves a burst (its saturation rate); then every system runs Poisson arrivals (or a trace's own,
scaled: harness.rate_sweep.grid.rate_spec) at each rate
of a grid set relative to continuous's saturation, rates ascending, systems interleaved,
as the schedule (harness.rate_sweep.schedule) adapts the grid to what the runs show. A
report is written after every rate (PRELIMINARY) and after Ctrl-C (STOPPED).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, field_validator

from harness.errors import ServerError, UsageError
from harness.jobs.fields import BudgetMinutes, OutDir, Positive
from harness.jobs.stages import Interruption, default_out
from harness.rate_sweep.defaults import (
    DEFAULT_FRACTIONS,
    EXTRA_RATE_FACTOR,
    EXTRA_RATES,
    MEASURE_S,
    REFINE_RUNS,
    WARMUP_S,
)
from harness.systems import SERVER_MODE, ServerMode, SystemName
from harness.workload.limits import MAX_REQUESTS, NonNegativeSeconds, Seconds
from launchers import Endpoints, ServerConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from harness.budget import JobClock, JobPlan
    from harness.rate_sweep.measure import SweepMeasurements
    from harness.rate_sweep.schedule import RateSchedule
    from harness.sweep.runs import SweepCell
    from harness.sweep.servers import SweepTarget
    from harness.workload import WorkloadSpec

logger = logging.getLogger(__name__)

DEFAULT_WORKLOAD = "cpu-anyscale-latency"
# Naive waves are sent whole, ignoring arrival times (harness.driver.work), so only continuous and static batching
# are swept: the static server's, or on a continuous endpoint given alone, static batching kept by the client.
RATE_SYSTEMS: tuple[SystemName, ...] = ("continuous", "static")
ATTACHED_RATE_SYSTEMS: tuple[SystemName, ...] = ("continuous", "client-static")
SATURATION_REQUESTS = 200
# Scaled to the CPU default (docs/rate-sweep.md): twice static's TTFT floor at low load (its 1 s batch delay),
# and about twice continuous's p99 E2E near its saturation (a 1,536-token cap's tail).
DEFAULT_SLO_TTFT_P50_S = 2.0
DEFAULT_SLO_E2E_P99_S = 10.0
# Writing the last report (seconds), counted against a budget.
REPORT_S = 5.0


def _positive_numbers(values: tuple[float, ...]) -> tuple[float, ...]:
    if not values or not all(math.isfinite(value) and value > 0 for value in values):
        raise ValueError(f"every value must be a positive number, got {','.join(f'{v:g}' for v in values)!r}")
    return values


PositiveNumbers = Annotated[tuple[float, ...], AfterValidator(_positive_numbers)]


class RateSweep(BaseModel):
    """What one rate sweep runs: its settings, their defaults and ranges (the command's flags come from here)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(DEFAULT_WORKLOAD, description="workload file or name; its arrivals are replaced (a"
                          " trace's are scaled to each rate)")
    fractions: PositiveNumbers = Field(
        DEFAULT_FRACTIONS, description="offered rates as fractions of continuous's saturation rate"
    )
    rates: PositiveNumbers | None = Field(
        None, description="offered rates in requests/s instead of --fractions (e.g. 4,8,16,32)"
    )
    warmup_s: NonNegativeSeconds = Field(WARMUP_S, description="arrivals left out at the start of each run")
    measure_s: Seconds = Field(
        MEASURE_S, ge=1, description="measured seconds of arrivals per run; under 20 is noise here"
    )
    budget_min: BudgetMinutes | None = Field(
        None, description="fit the whole sweep in about this many minutes: after the bursts, the measured seconds"
        " per run are set to fill it (a budget that leaves under 20 s per run is refused)"
    )
    extra_rates: Annotated[int, Strict(), Field(ge=0, le=10)] = Field(
        EXTRA_RATES, description=f"rates added past the grid's top, each {EXTRA_RATE_FACTOR:g}x the last, while a"
        " system has not yet crossed its knee or SLO; 0: the grid only"
    )
    refine_runs: Annotated[int, Strict(), Field(ge=0, le=10)] = Field(
        REFINE_RUNS, description="runs per system halving the grid step around its held rate, then its knee; 0: none"
    )
    saturation_requests: Positive = Field(
        SATURATION_REQUESTS, le=MAX_REQUESTS, description="requests in each system's saturation burst"
    )
    slo_ttft_p50_s: Seconds = Field(DEFAULT_SLO_TTFT_P50_S, description="SLO: median time to first token, seconds")
    slo_e2e_p99_s: Seconds = Field(
        DEFAULT_SLO_E2E_P99_S, description="SLO: 99th percentile end-to-end latency, seconds"
    )
    out: OutDir | None = Field(None, description="report directory (default: reports/rates-<date>-<host>)")
    analyze: Path | None = Field(
        None, description="run nothing: rewrite the report of the sweep in DIR from its runs (e.g. under another SLO)",
        json_schema_extra={"metavar": "DIR"},
    )

    @field_validator("rates")
    @classmethod
    def _ascending(cls, rates: tuple[float, ...] | None) -> tuple[float, ...] | None:
        return None if rates is None else tuple(sorted(set(rates)))

    def check(self, server: ServerConfig) -> None:
        """Refuse a burst smaller than one batch of `server`."""
        if self.saturation_requests < server.max_num_seqs:
            raise UsageError(f"--saturation-requests: at least B = {server.max_num_seqs}, got"
                             f" {self.saturation_requests}")


@dataclass(frozen=True)
class RateSweepResult:
    """How a sweep ended: where its report is, and whether Ctrl-C stopped it."""

    # (report.md, report.html); None: stopped before any rate finished.
    report: tuple[Path, Path] | None
    stopped: str | None
    failed_requests: int


def sweep_rates(job: RateSweep, server: ServerConfig, endpoints: Endpoints) -> RateSweepResult:
    """Run the sweep on `server` (launched) or `endpoints` and write its report into `job.out`
    (or, with `job.analyze`, only rewrite that earlier sweep's report).

    Refuses what cannot be run (UsageError) before a server starts. Drives load: the
    process must be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched
    from harness.workload import load_spec

    if job.analyze is not None:
        return RateSweepResult(reanalyze(job.analyze, job.slo_ttft_p50_s, job.slo_e2e_p99_s), None, 0)
    require_patched("harness.jobs.sweep_rates")
    # Bad input is refused before the load and analysis code is imported (seconds).
    spec = load_spec(job.workload)
    job.check(server)
    out = job.out or default_out("rates-")

    from harness.budget import JobClock
    from harness.driver.runner import require_new_dir
    from harness.rate_sweep.curve import SloSeconds
    from harness.rate_sweep.grid import burst_spec
    from harness.rate_sweep.measure import SweepMeasurements
    from harness.rate_sweep.result import ScheduleSettings
    from harness.rate_sweep.schedule import FELL_BEHIND_RUNS, RateSchedule
    from harness.sweep.runs import SweepCell, iter_runs
    from harness.sweep.servers import run_targets

    require_new_dir(out, "report directory")
    began = time.monotonic()
    slo = SloSeconds(job.slo_ttft_p50_s, job.slo_e2e_p99_s)
    runs_dir = out / "runs"
    interruption = Interruption()
    with contextlib.ExitStack() as stack:
        targets = run_targets(server, out, stack, endpoints, workloads=(spec,))
        systems = [system for system in rate_systems(endpoints) if SERVER_MODE[system] in targets]
        launched_static = "static" in targets and targets["static"].server
        static_wait = server.batch_wait_s if launched_static or "client-static" in systems else None
        measure_s = job.measure_s
        measured = SweepMeasurements(spec.name, server.max_num_seqs, slo, job.warmup_s, measure_s, static_wait,
                                     ScheduleSettings(fell_behind_runs=FELL_BEHIND_RUNS, extra_rates=job.extra_rates,
                                                      refine_runs=job.refine_runs))
        clock = JobClock(None, len(systems))
        with interruption.catch(lambda: f"STOPPED by Ctrl-C after {len(clock.finished_s)} of {clock.total_runs}"
                                        " runs; only finished runs are shown"):
            bursts = [SweepCell(system, burst_spec(spec, job.saturation_requests), targets[SERVER_MODE[system]])
                      for system in systems]
            for burst in iter_runs(bursts, runs_dir, 1, note=clock.note):
                measured.add_burst(burst.path)
                clock.run_done()
            grid = list(job.rates) if job.rates else _grid(measured.saturation("continuous"), job.fractions)
            logger.info("rates (requests/s): " + ", ".join(f"{rate:g}" for rate in grid))
            schedule = RateSchedule(grid, systems, slo, {system: measured.saturation(system) for system in systems},
                                    job.extra_rates, job.refine_runs)
            if job.budget_min is not None:
                expected = [(rate, measured.saturation(system)) for system, rate in schedule.left()]
                measure_s = _measure_for_budget(job.budget_min, time.monotonic() - began, expected, job.warmup_s)
                measured.measure_s = measure_s
            _run_rates(schedule, RateRuns(spec, job.warmup_s, measure_s, targets, runs_dir), bursts, clock,
                       measured, out)
    if interruption.stopped is not None and not measured.points:
        return RateSweepResult(None, interruption.stopped, 0)
    markdown, page, _ = measured.write(out, interruption.stopped)
    return RateSweepResult((markdown, page), interruption.stopped, sum(point.failed for point in measured.points))


def rate_systems(endpoints: Endpoints) -> tuple[SystemName, ...]:
    """The systems swept: continuous and static, or client-static in static's place on a continuous endpoint given
    without a static one (the server has no static mode to send to)."""
    return ATTACHED_RATE_SYSTEMS if endpoints.continuous and not endpoints.static else RATE_SYSTEMS


def reanalyze(directory: Path, slo_ttft_p50_s: float, slo_e2e_p99_s: float) -> tuple[Path, Path]:
    """Rewrite the report of an earlier sweep in `directory` from its runs, under this SLO; (report.md, report.html)."""
    import json

    from harness.rate_sweep.curve import SloSeconds
    from harness.rate_sweep.measure import SweepMeasurements
    from harness.rate_sweep.report import SUMMARY_FILE
    from harness.rate_sweep.result import ScheduleSettings
    from harness.rundir.reader import find_run_dirs

    try:
        earlier = json.loads((directory / SUMMARY_FILE).read_text(encoding="utf-8"))
        settings = (earlier["workload"], earlier["batch_size"], earlier["warmup_s"], earlier["measure_s"],
                    earlier["static_batch_wait_s"])
        # Sweeps written before the schedule adapted the grid have none of its settings: every system ran every rate.
        schedule = ScheduleSettings(**{f.name: int(earlier.get(f.name, 0)) for f in fields(ScheduleSettings)})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--analyze {directory}: not a rate sweep's report directory ({exc})") from None
    workload, batch_size, warmup_s, measure_s, static_wait = settings
    measured = SweepMeasurements(workload, batch_size, SloSeconds(slo_ttft_p50_s, slo_e2e_p99_s), warmup_s,
                                 measure_s, static_wait, schedule)
    for path in find_run_dirs([directory / "runs"]):
        measured.add_run(path)
    markdown, page, _ = measured.write(directory, earlier.get("stage"))
    return markdown, page


@dataclass(frozen=True)
class RateRuns:
    """How a run of the sweep at one rate is made: its workload at a rate, where it runs, where it is written."""

    spec: WorkloadSpec
    warmup_s: float
    measure_s: float
    targets: Mapping[ServerMode, SweepTarget]
    runs_dir: Path

    def cell(self, system: str, rate: float) -> SweepCell:
        from harness.rate_sweep.grid import rate_spec
        from harness.sweep.runs import SweepCell

        return SweepCell(system, rate_spec(self.spec, rate, self.warmup_s, self.measure_s),
                         self.targets[SERVER_MODE[cast(SystemName, system)]])


def _run_rates(schedule: RateSchedule, runs: RateRuns, bursts: list[SweepCell], clock: JobClock,
               measured: SweepMeasurements, out: Path) -> None:
    """Make the schedule's runs group by group, the points so far told to the schedule; a PRELIMINARY report after
    each run."""
    from harness.rate_sweep.report import write_rate_report
    from harness.rate_sweep.schedule import FELL_BEHIND_RUNS
    from harness.sweep.runs import iter_runs

    made: list[tuple[str, float]] = []
    while group := schedule.next_runs():
        note = _replanned(clock, bursts, made, group, schedule, measured, runs.spec, runs.warmup_s + runs.measure_s)
        cells = [runs.cell(system, rate) for system, rate in group]
        for index, finished in enumerate(iter_runs(cells, runs.runs_dir, 1, note=note)):
            system = measured.add_point(finished.path).system
            was_in_sweep = schedule.in_sweep(system)
            found = measured.result()
            schedule.record([point for result in found.systems for point in result.points])
            made.append(group[index])
            clock.run_done()
            if was_in_sweep and not schedule.in_sweep(system):
                logger.info(f"[{system}] fell behind at {FELL_BEHIND_RUNS} rates: it runs no higher grid rate")
            write_rate_report(found, out, f"PRELIMINARY: {len(made)} runs so far; rewritten after each")


def _replanned(clock: JobClock, bursts: list[SweepCell], made: list[tuple[str, float]], group: list[tuple[str, float]],
               schedule: RateSchedule, measured: SweepMeasurements, spec: WorkloadSpec,
               arrivals_s: float) -> Callable[[], str]:
    """The progress note of a run in `group`, the ETA re-planned first from the runs made (`made` grows as this
    group's runs finish) and those expected."""
    first = len(made)

    def note() -> str:
        expected = [*made, *group[len(made) - first:], *schedule.left()]
        clock.replan(_job(bursts, clock.finished_s[:len(bursts)], expected, measured, spec, arrivals_s))
        return clock.note()

    return note


def _job(bursts: list[SweepCell], burst_s: list[float], runs: list[tuple[str, float]],
         measured: SweepMeasurements, spec: WorkloadSpec, arrivals_s: float) -> JobPlan:
    """The whole sweep as the ETA sees it: the bursts at what they took, then each run priced by expected_run_s."""
    from harness.budget import JobPlan, PlannedRun
    from harness.rate_sweep.grid import RUN_OVERHEAD_S, expected_run_s, rate_spec

    made = [PlannedRun(cast(SystemName, cell.system), cell.spec.name, 1, cell.spec.num_requests, seconds, seconds)
            for cell, seconds in zip(bursts, burst_s, strict=True)]
    prices = [expected_run_s(rate, measured.saturation(system), arrivals_s) for system, rate in runs]
    planned = [PlannedRun(cast(SystemName, system), rate_spec(spec, rate).name, 1, None, price - RUN_OVERHEAD_S, price)
               for (system, rate), price in zip(runs, prices, strict=True)]
    return JobPlan(tuple(made + planned))


def _grid(saturation: float, fractions: tuple[float, ...]) -> list[float]:
    """The offered rates from continuous's saturation; ServerError when its burst gave none."""
    from harness.rate_sweep.grid import rate_grid

    if not (math.isfinite(saturation) and saturation > 0):
        raise ServerError("continuous's saturation burst completed no request: no rates to offer (its run directory"
                          " says why); give --rates to sweep without it")
    return rate_grid(saturation, fractions)


def _measure_for_budget(budget_min: float, spent_s: float, runs: list[tuple[float, float]], warmup_s: float) -> float:
    """The measured seconds per run that fill what is left of the budget; UsageError under 20 s."""
    from harness.rate_sweep.defaults import TRUSTED_MEASURE_S
    from harness.rate_sweep.grid import expected_run_s, measure_for_budget

    measure_s = measure_for_budget(budget_min * 60 - spent_s - REPORT_S, runs, warmup_s)
    if measure_s < TRUSTED_MEASURE_S:
        needed_s = spent_s + REPORT_S + sum(expected_run_s(rate, saturation, warmup_s + TRUSTED_MEASURE_S)
                                            for rate, saturation in runs)
        needed = needed_s / 60
        raise UsageError(f"--budget-min {budget_min:g}: leaves {max(measure_s, 0.0):.0f} s of measured arrivals per run"
                         f" on this machine, under {TRUSTED_MEASURE_S:g} s; give at least {needed:.1f} minutes")
    logger.info(f"--budget-min {budget_min:g}: {measure_s:.0f} s of measured arrivals per run")
    return measure_s
