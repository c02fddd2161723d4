"""`batchbench` command line: one module per subcommand, one error boundary here.

Every subcommand module has `add_parser(subparsers)` and `run(args) -> int`.
Bad input exits 2 with one line on stderr; a server fault exits 1; no tracebacks.
"""

from __future__ import annotations

# Locust's load users run on gevent; patch before anything imports ssl or sockets.
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import NoReturn  # noqa: E402

from harness.cli import (  # noqa: E402
    analyze,
    calibration,
    gate,
    gpu_check,
    nightly,
    predict,
    prepare_model,
    reproduce,
    run,
    serve,
    sweep_rates,
    worker,
)
from harness.cli.options import check_options  # noqa: E402
from harness.cli.progress import show_progress  # noqa: E402
from harness.driver.interrupts import interrupt_main_on_signals  # noqa: E402
from harness.errors import EXIT_INTERRUPTED, BatchBenchError, UsageError  # noqa: E402

COMMANDS = (serve, prepare_model, run, worker, analyze, reproduce, sweep_rates, gate, nightly, predict, calibration,
            gpu_check)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming what is wrong, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="batchbench", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `batchbench` console script."""
    # Ctrl-C and SIGTERM (kill, a CI timeout) unwind the main greenlet, so launched servers
    # are stopped and records kept.
    interrupt_main_on_signals()
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
