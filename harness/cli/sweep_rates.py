"""`batchbench sweep-rates`: latency against offered rate per system (harness.jobs.rate_sweep).

This module only parses: the flags, their defaults from the job, then the job's result as
an exit code: 0, 1 (failed requests or a server), 2 (bad input) or 130 (interrupted).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from harness.cli.server_options import add_server_arguments, server_config
from harness.cli.targets import add_endpoint_arguments, endpoints_of
from harness.errors import EXIT_INTERRUPTED
from harness.jobs.rate_sweep import (
    DEFAULT_SLO_E2E_P99_S,
    DEFAULT_SLO_TTFT_P50_S,
    DEFAULT_WORKLOAD,
    SATURATION_REQUESTS,
    RateSweep,
    RateSweepResult,
)
from harness.jobs.stages import default_out
from harness.rate_sweep.defaults import (
    DEFAULT_FRACTIONS,
    EXTRA_RATE_FACTOR,
    EXTRA_RATES,
    MEASURE_S,
    REFINE_RUNS,
    WARMUP_S,
)

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
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
    from harness.cli.options import positive_numbers
    from harness.jobs.rate_sweep import reanalyze, sweep_rates
    from harness.workload import load_spec

    # Each flag's type and range were checked with every command's (harness.cli.options.SweepRatesOptions).
    if args.analyze is None:
        fractions = tuple(positive_numbers("--fractions", args.fractions))
        rates = tuple(sorted(set(positive_numbers("--rates", args.rates)))) if args.rates else None
        server, endpoints = server_config(args), endpoints_of(args)
        job = RateSweep(load_spec(args.workload), args.out or default_out("rates-"), fractions, rates, args.warmup_s,
                        args.measure_s, args.budget_min, args.extra_rates, args.refine_runs, args.saturation_requests,
                        args.slo_ttft_p50_s, args.slo_e2e_p99_s)
        job.check(server)
        return exit_code(sweep_rates(job, server, endpoints))
    print(reanalyze(args.analyze, args.slo_ttft_p50_s, args.slo_e2e_p99_s))
    return 0


def exit_code(result: RateSweepResult) -> int:
    """What the command exits with, said in the last progress line."""
    if result.report is None:
        logger.info(f"no rate finished: no report; exit {EXIT_INTERRUPTED}")
        return EXIT_INTERRUPTED
    markdown, page = result.report
    print(page)
    logger.info(f"rate sweep done: {markdown} and {page}")
    if result.stopped is not None:
        return EXIT_INTERRUPTED
    if result.failed_requests:
        logger.info(f"{result.failed_requests} requests failed: the report's table says where; exit 1")
        return 1
    return 0
