"""The load-client options shared by every command that drives load: how many worker processes."""

from __future__ import annotations

import argparse

from harness.jobs.fields import WORKERS_HELP


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    """`--workers N`: Locust's master and N load worker processes on this machine (1: one process)."""
    parser.add_argument(
        "--workers", type=int, default=1, help=f"{WORKERS_HELP} (default 1)")
