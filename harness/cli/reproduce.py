"""`batchbench reproduce`: the Anyscale-style sweep end to end, and its report.

One server start per mode, one after the other, both up for the whole sweep: the
continuous server hosts the continuous runs and the naive padded waves, the static server
the static runs, and every repetition runs each workload on all three systems back to
back. Before the first run a probe of each server (harness.probe) prices this machine's
steps; the plans are sized from it (harness.budget), and every progress line says where
the job stands and when it should end. A report is written after every repetition, and
after Ctrl-C. There is no separate calibration phase: the predictions come from step costs
fitted on the runs' own engine steps (harness.analysis.step_predict).

`--transformers` also starts `transformers serve` in its two modes and runs every workload
on them too (hf-continuous, hf-sequential), with the same plans, into the same report.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import platform
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.history_options import add_history_arguments
from harness.cli.load_options import add_workers_argument
from harness.cli.server_options import add_server_arguments
from harness.cli.targets import add_endpoint_arguments, sweep_targets
from harness.errors import EXIT_INTERRUPTED, UsageError
from harness.systems import HF_SYSTEMS, MODES, SERVER_MODE, SYSTEMS, HfMode, Mode, SystemName

if TYPE_CHECKING:
    from harness.budget import JobPlan
    from harness.sweep import SweepTarget
    from harness.workload import WorkloadSpec

logger = logging.getLogger(__name__)

# The four spread levels. The seed example (cpu-seed-100-200-300-1000) is left out of
# the default to keep the job shorter (the four alone take about 20 minutes at their
# smallest faithful plans: docs/validation/job-clock.md); add it with --workloads.
CPU_WORKLOADS = (
    "cpu-anyscale-cap32",
    "cpu-anyscale-cap128",
    "cpu-anyscale-cap512",
    "cpu-anyscale-cap1536",
)
DEFAULT_REPETITIONS = 3
# --quick: one repetition of this many requests per workload, two batches of 16 (seconds per cell, not 20+).
QUICK_REQUESTS = 32
EXIT_UNSTABLE = 3
# Analysing and rendering a report takes 4-10 s here (one repetition to all 36 runs): one per repetition.
REPORT_S = 8.0
CAVEATS = (
    "The CPU default serves a 4-layer Llama with hidden size 256 on one core. Unlike an 8B model on a GPU, its"
    " decode step is not dominated by reading weights, so a step of 16 sequences costs several times a step of"
    " one: batching is far from free here, and every gap is smaller than Anyscale's. The step-cost model shows"
    " by how much.",
    "Naive static batching is emulated by the client: waves of B requests, each row asked for the wave's longest"
    " output (padding), the next wave only after the whole wave finished, on the continuous server. Only each"
    " request's planned tokens count as useful.",
    "Static batching is vLLM's own engine with one change, admission (a --scheduler-cls plugin): a batch forms only"
    " when the previous one has drained. Finished rows stop costing compute but their slots stay empty.",
    "Client and server share two cores: the load driver's own CPU time slows the server a little, the same for"
    " every system.",
    "Predictions replay each run's plan as sent at once (burst). When the client sends late (send lateness),"
    " the engine waits with free rows and nothing queued, which no fitted step cost predicts: such runs measure slower"
    " than predicted, by about the share of time the engine sat starved.",
    "On the CPU default, vLLM's API server shares one core with the engine. With 64 streams open it coalesces"
    " tokens into fewer chunks (per-token timestamps then repeat; TPOT and ITL medians can fall near zero for"
    " short requests), and it answers /metrics late, so telemetry has gaps of seconds. Throughput, which is"
    " tokens per makespan, is not affected; the occupancy plot is coarser where the gaps are.",
)

TRANSFORMERS_CAVEAT = (
    "hf-continuous and hf-sequential are Hugging Face's `transformers serve`, a second server. Its continuous"
    " batching has no cap of B sequences per step: on a CPU the launcher gives each step 512 tokens and the cache"
    " and attention masks 2 GiB (transformers' defaults, 8,192 tokens and 90% of memory, stall a burst here)."
    " Its sequential mode serves one request at a time. It records no engine steps: its figures are the"
    " client's, and it is not predicted."
)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("reproduce", help="run the continuous vs static vs naive sweep and write the report")
    parser.add_argument(
        "--workloads",
        default=",".join(CPU_WORKLOADS),
        help="comma-separated workload files or names (default: the CPU sweep)",
    )
    parser.add_argument(
        "--repetitions",
        type=int,
        default=DEFAULT_REPETITIONS,
        help=f"runs per system and workload, interleaved (default {DEFAULT_REPETITIONS}; median and 95%% interval)",
    )
    parser.add_argument(
        "--budget-min",
        type=float,
        help="size every workload's plan so that the whole job takes about this many minutes on this machine"
        " (default: the smallest job whose fastest runs last 20 s and whose plans keep the ratios of the"
        " full ones; a budget below that is refused)",
    )
    parser.add_argument(
        "--full-size",
        action="store_true",
        help="run every workload at its own request count, whatever it costs (the reference report's plans)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: 1 repetition of {QUICK_REQUESTS} requests per workload; exit 0 when every request"
        " completed; the report says it is not a measurement",
    )
    parser.add_argument(
        "--transformers",
        action="store_true",
        help="also run Hugging Face's `transformers serve` on every workload, in its two modes: hf-continuous (its"
        " own continuous batching) and hf-sequential (one request at a time); the report shows them beside vLLM's",
    )
    parser.add_argument("--out", type=Path, help="report directory (default: reports/<date>-<host>)")
    add_endpoint_arguments(parser)
    add_workers_argument(parser)
    add_history_arguments(parser)
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.workload import load_specs

    began = time.monotonic()
    # Bad input is refused before the load, report and history code is imported (seconds).
    specs = load_specs([name.strip() for name in args.workloads.split(",") if name.strip()])
    if args.repetitions < 1:
        raise UsageError(f"--repetitions must be at least 1, got {args.repetitions}")
    _check_sizing_options(args)

    from harness.budget import JobClock
    from harness.driver.distributed.shard import cluster_spec
    from harness.driver.runner import require_new_dir
    from harness.history import HistoryStore
    from harness.history.record import record
    from harness.report.assemble import JobStage, assemble_report
    from harness.settings import Settings
    from harness.sweep import SweepCell, check_sweep_workers, iter_runs

    repetitions = 1 if args.quick else args.repetitions
    if args.quick:
        specs = [spec.model_copy(update={"num_requests": min(spec.num_requests or QUICK_REQUESTS, QUICK_REQUESTS)})
                 for spec in specs]
    cluster = cluster_spec(args.workers)
    systems = _systems(args)
    check_sweep_workers(specs, systems, args.max_num_seqs, cluster)
    out = args.out or Path("reports") / f"{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"
    require_new_dir(out, "report directory")
    store = None if args.no_history else HistoryStore(args.history or Settings.from_env().history_path)
    runs_dir = out / "runs"

    skipped = []
    if args.endpoint and not args.static_endpoint:
        skipped.append("Static batching was not measured: --endpoint was given without --static-endpoint.")
    if args.transformers:
        skipped.append(TRANSFORMERS_CAVEAT)
    finished: list[Path] = []
    stopped = None

    def write(stage: JobStage | None):
        return assemble_report(finished, out, caveats=[*CAVEATS, *skipped], smoke=args.quick, allow_partial=True,
                               stage=stage)

    with contextlib.ExitStack() as stack:
        targets = sweep_targets(args, out, stack, args.transformers)
        specs, job = _plan(args, specs, targets, repetitions, out / "probe")
        cells = [SweepCell(system, spec, targets[SERVER_MODE[system]])
                 for spec in specs for system in systems if SERVER_MODE[system] in targets]
        clock = JobClock(job, len(cells) * repetitions)
        try:
            # Per workload the three systems back to back, so each repetition's ratios compare
            # runs minutes apart at most.
            for made in iter_runs(cells, runs_dir, repetitions, cluster=cluster, note=clock.note):
                finished.append(made.path)
                clock.run_done()
                if made.repetition < repetitions and len(finished) == made.repetition * len(cells):
                    report = write(JobStage("PRELIMINARY", f"{made.repetition} of {repetitions} repetitions;"
                                            " the next repetition rewrites this report"))
                    logger.info(f"preliminary report ({made.repetition} of {repetitions} repetitions):"
                                f" {report.paths.html}")
        except KeyboardInterrupt:
            stopped = f"stopped by Ctrl-C after {len(finished)} of {clock.total_runs} runs"
            logger.info(f"{stopped}: writing the report of the finished runs")
    if stopped is not None:
        if not finished:
            logger.info(f"no run finished: no report; exit {EXIT_INTERRUPTED}")
            return EXIT_INTERRUPTED
        report = write(JobStage("STOPPED", f"{stopped}; it holds only the runs that finished"))
        print(report.paths.html)
        logger.info(f"partial report of {len(finished)} runs: {report.paths.html}; exit {EXIT_INTERRUPTED}")
        return EXIT_INTERRUPTED
    logger.info("analysing and rendering the report")
    # A run with failed requests is this command's own finding: reported (as PARTIAL), then exit 1.
    report = write(None)
    if store is not None and not args.quick:
        record(store, report.assessed, "reproduce", out.name)
    minutes = (time.monotonic() - began) / 60
    logger.info(f"reproduction done in {minutes:.1f} min: {report.paths.markdown} and {report.paths.html}")
    print(report.paths.html)
    if report.partial:
        logger.info(f"{len(report.partial)} runs have failed or missing requests: {report.partial[0]}; exit 1")
        return 1
    if args.quick:
        logger.info("smoke run: every request completed; stability is not judged; exit 0")
        return 0
    if not report.stable:
        unstable = ", ".join(str(row.level) for row in report.headline if not row.stable) or "no headline"
        logger.info(f"UNSTABLE headline ratios ({unstable}): the report says why; exit {EXIT_UNSTABLE}")
        return EXIT_UNSTABLE
    return 0


def _check_sizing_options(args: argparse.Namespace) -> None:
    """Refuse sizing options that contradict each other or cannot be met, before anything starts."""
    chosen = [flag for flag, given in (("--budget-min", args.budget_min is not None), ("--full-size", args.full_size),
                                       ("--quick", args.quick)) if given]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)}: choose one way to size the plans")
    if args.budget_min is not None and not (math.isfinite(args.budget_min) and args.budget_min > 0):
        raise UsageError(f"--budget-min: must be a positive number of minutes, got {args.budget_min!r}")
    if args.budget_min is not None and args.endpoint:
        raise UsageError("--budget-min: sizing needs the engine's step log, which only servers launched here have;"
                         " drop --endpoint or --budget-min")
    if args.budget_min is not None and args.transformers:
        raise UsageError("--budget-min: a budget prices vLLM's engine steps, and transformers serve records none;"
                         " drop --transformers or --budget-min")
    if args.transformers and args.endpoint:
        raise UsageError("--transformers launches its servers here: drop --endpoint, or run the transformers"
                         " endpoint with `batchbench run --backend transformers`")
    if args.transformers:
        from launchers.transformers_server import check_servable

        check_servable(args.model or "tiny")


def _systems(args: argparse.Namespace) -> tuple[SystemName, ...]:
    """vLLM's three systems, and transformers serve's two with --transformers."""
    return SYSTEMS + HF_SYSTEMS if args.transformers else SYSTEMS


def _plan(args: argparse.Namespace, specs: list[WorkloadSpec], targets: dict[Mode | HfMode, SweepTarget],
          repetitions: int, probe_dir: Path) -> tuple[list[WorkloadSpec], JobPlan | None]:
    """The plans the job runs, sized from a probe of this machine, and the job's estimate (None: no probe).

    The probe and the sizing are vLLM's: transformers serve records no engine steps. Its
    runs get the same plans, priced as vLLM's continuous runs until each system's first
    runs rescale them (harness.budget.eta).
    """
    from harness.budget import plan_job, plan_line, size_for_budget
    from harness.probe import probe_machine

    if args.quick:
        return specs, None
    vllm = {mode: target for mode, target in targets.items() if mode in MODES}
    if any(target.server is None for target in vllm.values()):
        logger.info("no probe and no ETA: a server given by --endpoint has no engine step log here")
        return specs, None
    probe = probe_machine(vllm, specs, probe_dir, args.max_num_seqs)
    if probe is None:
        return specs, None
    systems = [system for system in SYSTEMS if SERVER_MODE[system] in targets]
    after_s = REPORT_S * repetitions
    if not args.full_size:
        sizing = size_for_budget(args.budget_min, specs, systems, repetitions, probe.machine, after_s=after_s)
        specs = list(sizing.specs)
        for workload in sizing.workloads:
            logger.info(f"{workload.spec.name}: {workload.spec.num_requests} of its {workload.full_requests} requests,"
                        f" fastest run about {workload.fastest_run_s:.0f} s")
    every = [system for system in _systems(args) if SERVER_MODE[system] in targets]
    stand_ins: dict[SystemName, SystemName] = {system: "continuous" for system in HF_SYSTEMS}
    job = plan_job(specs, every, repetitions, probe.machine, after_s=after_s, stand_ins=stand_ins)
    logger.info(f"probe took {probe.seconds:.0f} s; {plan_line(job, datetime.now())}")
    return specs, job
