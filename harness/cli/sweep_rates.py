"""`batchbench sweep-rates`: latency against offered rate per system, its knee and the rate held under an SLO.

The latency half of Anyscale's experiment (harness.rate_sweep). Both vLLM servers are
launched as `reproduce` launches them (or given as endpoints). Each system first serves a
burst (its saturation rate); then every system runs Poisson arrivals at each rate of a grid
set relative to continuous's saturation, rates ascending, systems interleaved. A report is
written after every rate (PRELIMINARY) and after Ctrl-C (STOPPED).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import platform
import time
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from harness.cli.server_options import add_server_arguments
from harness.cli.targets import add_endpoint_arguments, sweep_targets
from harness.errors import EXIT_INTERRUPTED, ServerError, UsageError
from harness.systems import SERVER_MODE, HfMode, Mode, SystemName

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from harness.budget import JobClock, JobPlan
    from harness.rate_sweep.measure import SweepMeasurements
    from harness.rate_sweep.schedule import RateSchedule
    from harness.sweep import SweepCell, SweepTarget
    from harness.workload import WorkloadSpec

logger = logging.getLogger(__name__)

DEFAULT_WORKLOAD = "cpu-anyscale-latency"
# Naive waves are sent whole, ignoring arrival times (harness.driver.work), so only these two are swept.
RATE_SYSTEMS: tuple[SystemName, ...] = ("continuous", "static")
SATURATION_REQUESTS = 200
# Scaled to the CPU default (docs/rate-sweep.md): twice static's TTFT floor at low load (its 1 s batch delay),
# and about twice continuous's p99 E2E near its saturation (a 1,536-token cap's tail).
DEFAULT_SLO_TTFT_P50_S = 2.0
DEFAULT_SLO_E2E_P99_S = 10.0
# Writing the last report (seconds), counted against --budget-min.
REPORT_S = 5.0


def add_parser(subparsers) -> None:
    from harness.rate_sweep.defaults import (
        DEFAULT_FRACTIONS,
        EXTRA_RATE_FACTOR,
        EXTRA_RATES,
        MEASURE_S,
        REFINE_RUNS,
        WARMUP_S,
    )

    parser = subparsers.add_parser("sweep-rates", help="latency against offered rate (Poisson arrivals) per system:"
                                   " knees, the rate each holds under an SLO, queue waits")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD,
                        help=f"workload file or name; its arrivals are replaced (default {DEFAULT_WORKLOAD})")
    parser.add_argument("--fractions", default=",".join(f"{f:g}" for f in DEFAULT_FRACTIONS),
                        help="offered rates as fractions of continuous's saturation rate (default %(default)s)")
    parser.add_argument("--rates", help="offered rates in requests/s instead of --fractions (e.g. 4,8,16,32)")
    parser.add_argument("--warmup-s", type=float, default=WARMUP_S,
                        help="arrivals left out at the start of each run (default %(default)g)")
    parser.add_argument("--measure-s", type=float, default=MEASURE_S,
                        help="measured seconds of arrivals per run (default %(default)g; under 20 is noise here)")
    parser.add_argument("--budget-min", type=float,
                        help="fit the whole sweep in about this many minutes: after the bursts, the measured seconds"
                        " per run are set to fill it (a budget that leaves under 20 s per run is refused)")
    parser.add_argument("--extra-rates", type=int, default=EXTRA_RATES,
                        help=f"rates added past the grid's top, each {EXTRA_RATE_FACTOR:g}x the last, while a system"
                        " has not yet crossed its knee or SLO (default %(default)s; 0: the grid only)")
    parser.add_argument("--refine-runs", type=int, default=REFINE_RUNS,
                        help="runs per system halving the grid step around its held rate, then its knee"
                        " (default %(default)s; 0: none)")
    parser.add_argument("--saturation-requests", type=int, default=SATURATION_REQUESTS,
                        help="requests in each system's saturation burst (default %(default)s)")
    parser.add_argument("--slo-ttft-p50-s", type=float, default=DEFAULT_SLO_TTFT_P50_S,
                        help="SLO: median time to first token, seconds (default %(default)g)")
    parser.add_argument("--slo-e2e-p99-s", type=float, default=DEFAULT_SLO_E2E_P99_S,
                        help="SLO: 99th percentile end-to-end latency, seconds (default %(default)g)")
    parser.add_argument("--out", type=Path, help="report directory (default: reports/rates-<date>-<host>)")
    parser.add_argument("--analyze", type=Path, metavar="DIR",
                        help="run nothing: rewrite the report of the sweep in DIR from its runs"
                        " (e.g. under another SLO)")
    add_endpoint_arguments(parser)
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.workload import load_spec

    # Each flag's type and range were checked with every command's (harness.cli.options.SweepRatesOptions).
    if args.analyze is not None:
        return _analyze(args.analyze, args)
    spec = load_spec(args.workload)
    fractions, rates = _grid_options(args)
    if args.saturation_requests < args.max_num_seqs:
        raise UsageError(f"--saturation-requests: at least B = {args.max_num_seqs}, got {args.saturation_requests}")
    out = args.out or Path("reports") / f"rates-{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"

    from harness.driver.runner import require_new_dir

    require_new_dir(out, "report directory")
    return _sweep(args, spec, fractions, rates, out)


def _analyze(directory: Path, args: argparse.Namespace) -> int:
    """Rewrite the report of an earlier sweep from its runs, under this command's SLO."""
    import json

    from harness.rate_sweep.curve import Slo
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
    measured = SweepMeasurements(workload, batch_size, Slo(args.slo_ttft_p50_s, args.slo_e2e_p99_s), warmup_s,
                                 measure_s, static_wait, schedule)
    for path in find_run_dirs([directory / "runs"]):
        measured.add_run(path)
    _, page, _ = measured.write(directory, earlier.get("stage"))
    print(page)
    return 0


def _grid_options(args: argparse.Namespace) -> tuple[tuple[float, ...], list[float] | None]:
    """(--fractions, --rates): each a list of positive numbers; --rates wins when given."""
    from harness.cli.options import positive_numbers

    fractions = tuple(positive_numbers("--fractions", args.fractions))
    rates = sorted(set(positive_numbers("--rates", args.rates))) if args.rates else None
    return fractions, rates


def _sweep(args: argparse.Namespace, spec, fractions: tuple[float, ...], rates: list[float] | None,
           out: Path) -> int:
    from harness.budget import JobClock
    from harness.rate_sweep.curve import Slo
    from harness.rate_sweep.grid import burst_spec
    from harness.rate_sweep.measure import SweepMeasurements
    from harness.rate_sweep.result import ScheduleSettings
    from harness.rate_sweep.schedule import FELL_BEHIND_RUNS, RateSchedule
    from harness.sweep import SweepCell, iter_runs

    began = time.monotonic()
    slo = Slo(args.slo_ttft_p50_s, args.slo_e2e_p99_s)
    runs_dir = out / "runs"
    stopped = None
    with contextlib.ExitStack() as stack:
        targets = sweep_targets(args, out, stack)
        systems = [system for system in RATE_SYSTEMS if SERVER_MODE[system] in targets]
        static_wait = args.batch_wait_s if "static" in targets and targets["static"].server else None
        measure_s = args.measure_s
        measured = SweepMeasurements(spec.name, args.max_num_seqs, slo, args.warmup_s, measure_s, static_wait,
                                     ScheduleSettings(fell_behind_runs=FELL_BEHIND_RUNS, extra_rates=args.extra_rates,
                                                      refine_runs=args.refine_runs))
        clock = JobClock(None, len(systems))
        try:
            bursts = [SweepCell(system, burst_spec(spec, args.saturation_requests), targets[SERVER_MODE[system]])
                      for system in systems]
            for burst in iter_runs(bursts, runs_dir, 1, note=clock.note):
                measured.add_burst(burst.path)
                clock.run_done()
            grid = rates or _grid(measured.saturation("continuous"), fractions)
            logger.info("rates (requests/s): " + ", ".join(f"{rate:g}" for rate in grid))
            schedule = RateSchedule(grid, systems, slo, {system: measured.saturation(system) for system in systems},
                                    args.extra_rates, args.refine_runs)
            if args.budget_min is not None:
                expected = [(rate, measured.saturation(system)) for system, rate in schedule.left()]
                measure_s = _measure_for_budget(args.budget_min, time.monotonic() - began, expected, args.warmup_s)
                measured.measure_s = measure_s
            _run_rates(schedule, RateRuns(spec, args.warmup_s, measure_s, targets, runs_dir), bursts, clock,
                       measured, out)
        except KeyboardInterrupt:
            stopped = (f"STOPPED by Ctrl-C after {len(clock.finished_s)} of {clock.total_runs} runs; only finished runs"
                       " are shown")
            logger.info(stopped)
    if stopped is not None and not measured.points:
        logger.info(f"no rate finished: no report; exit {EXIT_INTERRUPTED}")
        return EXIT_INTERRUPTED
    markdown, page, _ = measured.write(out, stopped)
    print(page)
    logger.info(f"rate sweep done: {markdown} and {page}")
    if stopped is not None:
        return EXIT_INTERRUPTED
    failed = sum(point.failed for point in measured.points)
    if failed:
        logger.info(f"{failed} requests failed: the report's table says where; exit 1")
        return 1
    return 0


@dataclass(frozen=True)
class RateRuns:
    """How a Poisson run of the sweep is made: its workload at a rate, where it runs, where it is written."""

    spec: WorkloadSpec
    warmup_s: float
    measure_s: float
    targets: Mapping[Mode | HfMode, SweepTarget]
    runs_dir: Path

    def cell(self, system: str, rate: float) -> SweepCell:
        from harness.rate_sweep.grid import rate_spec
        from harness.sweep import SweepCell

        return SweepCell(system, rate_spec(self.spec, rate, self.warmup_s, self.measure_s),
                         self.targets[SERVER_MODE[cast(SystemName, system)]])


def _run_rates(schedule: RateSchedule, runs: RateRuns, bursts: list[SweepCell], clock: JobClock,
               measured: SweepMeasurements, out: Path) -> None:
    """Make the schedule's runs group by group, the points so far told to the schedule; a PRELIMINARY report after
    each run."""
    from harness.rate_sweep.report import write_rate_report
    from harness.rate_sweep.schedule import FELL_BEHIND_RUNS
    from harness.sweep import iter_runs

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
    """The measured seconds per run that fill what is left of --budget-min; UsageError under 20 s."""
    from harness.rate_sweep.grid import expected_run_s, measure_for_budget
    from harness.rate_sweep.report import TRUSTED_MEASURE_S

    measure_s = measure_for_budget(budget_min * 60 - spent_s - REPORT_S, runs, warmup_s)
    if measure_s < TRUSTED_MEASURE_S:
        needed_s = spent_s + REPORT_S + sum(expected_run_s(rate, saturation, warmup_s + TRUSTED_MEASURE_S)
                                            for rate, saturation in runs)
        needed = needed_s / 60
        raise UsageError(f"--budget-min {budget_min:g}: leaves {max(measure_s, 0.0):.0f} s of measured arrivals per run"
                         f" on this machine, under {TRUSTED_MEASURE_S:g} s; give at least {needed:.1f} minutes")
    logger.info(f"--budget-min {budget_min:g}: {measure_s:.0f} s of measured arrivals per run")
    return measure_s
