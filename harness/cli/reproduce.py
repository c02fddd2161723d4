"""`batchbench reproduce`: the Anyscale-style sweep end to end, and its report.

One server start per mode, both up for the whole sweep: the continuous server hosts
the continuous runs and the naive padded waves, the static server the static runs, and
every repetition runs each workload on all three systems back to back. There is no separate
calibration phase: the predictions come from step costs fitted on the runs'
own engine steps (harness.analysis.step_predict).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import platform
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from harness.cli.history_options import add_history_arguments
from harness.cli.load_options import add_workers_argument
from harness.cli.server_options import add_server_arguments, server_spec
from harness.errors import UsageError
from harness.systems import SERVER_MODE, SYSTEMS, Mode
from launchers import start

logger = logging.getLogger(__name__)

# The four spread levels. The seed example (cpu-seed-100-200-300-1000) is left out of
# the default to keep the sweep shorter (three repetitions of 20 s cells already take
# over 15 minutes on 2 cores: docs/validation/reproduction.md); add it with --workloads.
CPU_WORKLOADS = (
    "cpu-anyscale-cap32",
    "cpu-anyscale-cap128",
    "cpu-anyscale-cap512",
    "cpu-anyscale-cap1536",
)
DEFAULT_REPETITIONS = 3
# --quick: one repetition of requests this many per workload (seconds per cell, not 20+).
QUICK_REQUESTS = 64
EXIT_UNSTABLE = 3
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
        "--quick",
        action="store_true",
        help=f"smoke run: 1 repetition of {QUICK_REQUESTS} requests per workload;"
        " the report says it is not a measurement",
    )
    parser.add_argument("--out", type=Path, help="report directory (default: reports/<date>-<host>)")
    parser.add_argument("--endpoint", help="an already running continuous server (skips launching it)")
    parser.add_argument("--static-endpoint", help="an already running static-batching server")
    parser.add_argument("--tokenizer", help="tokenizer directory when the endpoints' model is not local")
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

    from harness.driver.distributed.shard import cluster_spec
    from harness.driver.endpoint import load_tokenizer, probe_endpoint
    from harness.driver.runner import require_new_dir
    from harness.history import HistoryStore
    from harness.history.record import record
    from harness.report.assemble import assemble_report
    from harness.settings import Settings
    from harness.sweep import SweepCell, SweepTarget, check_sweep_workers, run_cells

    repetitions = 1 if args.quick else args.repetitions
    if args.quick:
        specs = [spec.model_copy(update={"num_requests": min(spec.num_requests or QUICK_REQUESTS, QUICK_REQUESTS)})
                 for spec in specs]
    cluster = cluster_spec(args.workers)
    check_sweep_workers(specs, SYSTEMS, args.max_num_seqs, cluster)
    out = args.out or Path("reports") / f"{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"
    require_new_dir(out, "report directory")
    store = None if args.no_history else HistoryStore(args.history or Settings.from_env().history_path)
    runs_dir = out / "runs"

    def target_for(mode: Mode, endpoint: str | None, stack: contextlib.ExitStack) -> SweepTarget:
        server_info, url = None, endpoint
        if endpoint is None:
            server = stack.enter_context(start(server_spec(args, mode), log_dir=out / "servers" / mode))
            url, server_info = server.base_url, asdict(server.info)
        assert url is not None, "the endpoint given, or the launched server's"
        # A launched server serves the model it was given; an endpoint must serve the one named.
        info = probe_endpoint(url, {}, args.model if endpoint else None)
        return SweepTarget(info, load_tokenizer(args.tokenizer, info), args.max_num_seqs, server_info)

    skipped = []
    with contextlib.ExitStack() as stack:
        targets: dict[Mode, SweepTarget] = {"continuous": target_for("continuous", args.endpoint, stack)}
        if args.endpoint and not args.static_endpoint:
            skipped.append("Static batching was not measured: --endpoint was given without --static-endpoint.")
        else:
            targets["static"] = target_for("static", args.static_endpoint, stack)
        # Per workload the three systems back to back, so each repetition's ratios compare
        # runs minutes apart at most.
        cells = [SweepCell(system, spec, targets[SERVER_MODE[system]])
                 for spec in specs for system in SYSTEMS if SERVER_MODE[system] in targets]
        run_dirs = run_cells(cells, runs_dir, repetitions, cluster=cluster)
    logger.info("analysing and rendering the report")
    # A run with failed requests is this command's own finding: reported (as PARTIAL), then exit 1.
    report = assemble_report(
        run_dirs, out, caveats=[*CAVEATS, *skipped], smoke=args.quick, allow_partial=True
    )
    if store is not None:
        record(store, report.assessed, "reproduce", out.name)
    minutes = (time.monotonic() - began) / 60
    logger.info(f"reproduction done in {minutes:.1f} min: {report.paths.markdown} and {report.paths.html}")
    print(report.paths.html)
    if report.partial:
        logger.info(f"{len(report.partial)} runs have failed or missing requests: {report.partial[0]}; exit 1")
        return 1
    if not report.stable:
        unstable = ", ".join(str(row.level) for row in report.headline if not row.stable) or "no headline"
        logger.info(f"UNSTABLE headline ratios ({unstable}): the report says why; exit {EXIT_UNSTABLE}")
        return EXIT_UNSTABLE
    return 0
