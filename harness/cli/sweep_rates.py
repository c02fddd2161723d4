"""`batchbench sweep-rates`: latency against offered rate per system (harness.jobs.rate_sweep).

This module only parses: the flags, their defaults from the job, then the job's result as
an exit code: 0, 1 (failed requests or a server), 2 (bad input) or 130 (interrupted).
"""

from __future__ import annotations

import argparse
import logging

from harness.cli.flags import add_model_arguments, model_of
from harness.cli.server_options import add_server_arguments, server_config
from harness.cli.targets import add_endpoint_arguments, endpoints_of
from harness.errors import EXIT_INTERRUPTED
from harness.jobs.rate_sweep import RateSweep, RateSweepResult

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("sweep-rates", help="latency against offered rate (Poisson arrivals) per system:"
                                   " knees, the rate each holds under an SLO, queue waits")
    add_model_arguments(parser, RateSweep)
    add_endpoint_arguments(parser)
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.jobs.rate_sweep import sweep_rates

    job, server, endpoints = model_of(RateSweep, args), server_config(args), endpoints_of(args)
    return exit_code(sweep_rates(job, server, endpoints))


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
