"""`batchbench nightly --suite FILE`: a night's runs, appended to the history, gated, trended (harness.jobs.night).

This module only parses: the flags (from the job's config), then publishes the verdict
and exits with it: 0 when every configuration passes (or starts its baseline), 1 on a
regression, 3 when a configuration stays inconclusive after the suite's extra
repetitions, 2 on bad input.
"""

from __future__ import annotations

import argparse
import logging

from harness.cli.flags import add_model_arguments, model_of
from harness.cli.gate import add_gate_outputs, destinations
from harness.jobs.night import Night
from harness.settings import Settings

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("nightly", help="run a suite, append it to the history, gate it against the last"
                                   " accepted nights and write the trend report (exit 0, 1 or 3)")
    add_model_arguments(parser, Night)
    add_gate_outputs(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.cli.gate_publish import publish
    from harness.jobs.night import run_nightly

    job = model_of(Night, args, history=args.history)
    publishing = destinations(args, Settings.from_env())
    night = run_nightly(job)
    publish(night.result, publishing)
    logger.info(f"trend: {night.trend_page}")
    return night.result.exit_code
