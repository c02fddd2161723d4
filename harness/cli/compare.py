"""`batchbench compare`: two server builds, A and B, on the same workloads; is B slower? (harness.jobs.compare)

This module only parses: the job's flags, the server flags both sides share, and each
side's own (`--a-server-python`, `--b-vllm-arg`, ...), then exits as `gate` does: 0 pass,
1 regression, 3 inconclusive, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging

from harness.cli.flags import argument_of, flag_of_field, model_of, values_of
from harness.cli.server_options import add_server_arguments, server_config
from harness.jobs.compare import SIDES, BuildArguments, Comparison

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("compare", help="two server builds (two vLLM environments, or two sets of"
                                   " arguments) on the same workloads, interleaved and paired: is B slower than A?"
                                   " (exit 0 pass, 1 regression, 3 inconclusive)")
    from harness.cli.flags import add_model_arguments

    add_model_arguments(parser, Comparison)
    add_server_arguments(parser)
    for side in SIDES:
        group = parser.add_argument_group(f"build {side.upper()}")
        for name, field in BuildArguments.model_fields.items():
            flag, keywords = argument_of(name, field)
            group.add_argument(f"--{side}-{flag_of_field(name, field).removeprefix('--')}", dest=f"{side}_{name}",
                               **keywords)
    parser.set_defaults(handler=run)


def side_arguments(args: argparse.Namespace, side: str) -> BuildArguments:
    """One side's own flags as its BuildArguments."""
    prefixed = argparse.Namespace(**{name: getattr(args, f"{side}_{name}") for name in BuildArguments.model_fields})
    return BuildArguments(**values_of(BuildArguments, prefixed))


def run(args: argparse.Namespace) -> int:
    from harness.jobs.compare import compare

    job = model_of(Comparison, args)
    shared = server_config(args)
    a, b = (side_arguments(args, side).applied_to(shared) for side in SIDES)
    result = compare(job, a, b)
    for line in result_lines(result):
        logger.info(line)
    print(result.outcome.upper())
    return result.exit_code


def result_lines(result) -> list[str]:
    """The verdict of each (workload, system), one line each, as the terminal shows it."""
    lines = []
    for cell in result.cells:
        verdict = cell.verdict
        figure = (f"B/A {verdict.ratio:.3f} ({verdict.low:.3f}-{verdict.high:.3f})" if verdict is not None
                  else "not judged")
        lines.append(f"{cell.workload} {cell.system}: {cell.outcome.upper()}, {figure} on {cell.metric}")
    lines.append(f"compare: {result.outcome.upper()} (exit {result.exit_code})")
    return lines
