"""The results-history options of the commands that record their runs (run, reproduce)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.settings import HISTORY_DEFAULT_HELP, Settings


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    """--history and --no-history, for the commands that record their runs (run, reproduce)."""
    parser.add_argument("--history", type=Path, help="results history to append the runs to (default:"
                        f" {HISTORY_DEFAULT_HELP})")
    parser.add_argument("--no-history", action="store_true", help="do not append the runs to the results history")


def history_path(args: argparse.Namespace) -> Path | None:
    """The history those options name: --history, else the environment's; None with --no-history."""
    return None if args.no_history else args.history or Settings.from_env().history_path
