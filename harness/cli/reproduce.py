"""`batchbench reproduce`: the Anyscale-style sweep end to end, and its report (harness.jobs.reproduce).

This module only parses: the flags, their defaults from the job, then the job's result as
an exit code: 0, 1 (a failed run or server), 2 (bad input), 3 (a headline ratio is
UNSTABLE) or 130 (interrupted).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness.cli.history_options import add_history_arguments, history_path
from harness.cli.load_options import add_workers_argument
from harness.cli.server_options import add_server_arguments, server_config
from harness.cli.targets import add_endpoint_arguments, endpoints_of
from harness.errors import EXIT_INTERRUPTED
from harness.jobs.reproduce import CPU_WORKLOADS, DEFAULT_REPETITIONS, QUICK_BATCHES, Reproduction, ReproductionResult
from harness.jobs.stages import default_out

logger = logging.getLogger(__name__)

EXIT_UNSTABLE = 3


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
        help=f"smoke run: 1 repetition of {QUICK_BATCHES} batches (B requests each) per workload; exit 0 when every"
        " request completed; the report says it is not a measurement",
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
    from harness.jobs.reproduce import reproduce
    from harness.workload import load_specs

    # Bad input is refused before the load, report and history code is imported (seconds).
    server, endpoints = server_config(args), endpoints_of(args)
    job = Reproduction(
        tuple(load_specs([name.strip() for name in args.workloads.split(",") if name.strip()])),
        args.out or default_out(), repetitions=args.repetitions, budget_min=args.budget_min,
        full_size=args.full_size, quick=args.quick, transformers=args.transformers, workers=args.workers,
        history=history_path(args),
    )
    job.check(endpoints, server)
    return exit_code(reproduce(job, server, endpoints), job)


def exit_code(result: ReproductionResult, job: Reproduction) -> int:
    """What the command exits with, said in the last progress line."""
    report = result.report
    if result.stopped is not None:
        if report is None:
            logger.info(f"no run finished: no report; exit {EXIT_INTERRUPTED}")
            return EXIT_INTERRUPTED
        print(report.paths.html)
        logger.info(f"partial report of {result.runs} runs: {report.paths.html}; exit {EXIT_INTERRUPTED}")
        return EXIT_INTERRUPTED
    assert report is not None, "a job that was not stopped reports"
    logger.info(f"reproduction done in {result.minutes:.1f} min: {report.paths.markdown} and {report.paths.html}")
    print(report.paths.html)
    if report.partial:
        logger.info(f"{len(report.partial)} runs have failed or missing requests: {report.partial[0]}; exit 1")
        return 1
    if job.quick:
        logger.info("smoke run: every request completed; stability is not judged; exit 0")
        return 0
    if not report.stable:
        unstable = ", ".join(str(row.level) for row in report.headline if not row.stable) or "no headline"
        logger.info(f"UNSTABLE headline ratios ({unstable}): the report says why; exit {EXIT_UNSTABLE}")
        return EXIT_UNSTABLE
    return 0
