"""The `batchbench` parser: one subcommand per module, one error boundary.

Every subcommand module has `add_parser(subparsers)` and `run(args) -> int`.
Bad input exits 2 with one line on stderr; a server fault exits 1; no tracebacks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness.cli import (
    analyze,
    calibration,
    compare,
    gate,
    gpu_check,
    make_trace,
    nightly,
    predict,
    prepare_model,
    reproduce,
    run,
    serve,
    sweep_rates,
    worker,
)
from harness.cli.options import check_options
from harness.cli.progress import show_progress
from harness.errors import EXIT_INTERRUPTED, BatchBenchError, UsageError

COMMANDS = (serve, prepare_model, make_trace, run, worker, analyze, reproduce, sweep_rates, compare, gate, nightly,
            predict, calibration, gpu_check)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming what is wrong, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every subcommand's flags."""
    parser = _OneLineParser(prog="batchbench", description="measure, explain and guard the continuous-vs-static"
                            " batching gap of an LLM inference server")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def dispatch(argv: Sequence[str]) -> int:
    """Parse `argv`, check its values, run its command, and turn an error into an exit code."""
    show_progress()
    try:
        args = build_parser().parse_args(argv)
        check_options(args)
        return args.handler(args)
    except BatchBenchError as exc:
        print(f"batchbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("batchbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
