"""`batchbench reproduce`: the Anyscale-style sweep end to end, and its report (harness.jobs.reproduce).

This module only parses: the flags, their defaults from the job, then the job's result as
an exit code: 0, 1 (a failed run or server), 2 (bad input), 3 (a headline ratio is
UNSTABLE) or 130 (interrupted).
"""

from __future__ import annotations

import argparse
import logging

from harness.cli.flags import add_model_arguments, model_of
from harness.cli.history_options import add_history_arguments, history_path
from harness.cli.server_options import add_server_arguments, server_config
from harness.cli.targets import add_endpoint_arguments, endpoints_of
from harness.errors import EXIT_INTERRUPTED
from harness.jobs.presets import find_preset
from harness.jobs.reproduce import Reproduction, ReproductionResult

logger = logging.getLogger(__name__)

EXIT_UNSTABLE = 3


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("reproduce", help="run the continuous vs static vs naive sweep and write the report")
    add_model_arguments(parser, Reproduction)
    add_endpoint_arguments(parser)
    add_history_arguments(parser)
    add_server_arguments(parser)
    # Unset, not defaulted: a preset fills what was not given (apply_preset); else the fields' defaults hold.
    parser.set_defaults(handler=run, workloads=None, max_num_seqs=None)


def run(args: argparse.Namespace) -> int:
    from harness.jobs.reproduce import reproduce

    if args.preset is not None:
        apply_preset(args)
    job = model_of(Reproduction, args, history=history_path(args), batch_given=args.max_num_seqs is not None)
    server, endpoints = server_config(args), endpoints_of(args)
    return exit_code(reproduce(job, server, endpoints), job)


def apply_preset(args: argparse.Namespace) -> None:
    """Fill the flags a preset sets and the user did not give: the model, the workloads, and their full size
    unless --quick or --budget-min sizes them."""
    preset = find_preset(args.preset)
    if args.model is None:
        args.model = preset.model
    if args.workloads is None:
        args.workloads = preset.workloads
    if not args.quick and args.budget_min is None:
        args.full_size = True


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
    if not report.usable:
        unstable = ", ".join(str(row.level) for row in report.headline if not row.usable) or "no headline"
        logger.info(f"UNSTABLE headline ratios ({unstable}): the report says why; exit {EXIT_UNSTABLE}")
        return EXIT_UNSTABLE
    return 0
