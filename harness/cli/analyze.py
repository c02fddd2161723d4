"""`batchbench analyze`: the report of run directories made earlier (here or elsewhere)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import UsageError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("analyze", help="analyse run directories and render the report")
    parser.add_argument(
        "runs", nargs="+", type=Path,
        help="run directories, a sweep's runs/ directory, or a report directory holding runs/",
    )
    parser.add_argument("--out", type=Path, required=True, help="report directory")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="analyse runs that lack rows or hold failed requests; the report then says PARTIAL on its first line",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.report.assemble import assemble_report
    from harness.rundir.reader import find_run_dirs

    if args.out.is_dir() and any(args.out.iterdir()) and not (args.out / "report.md").is_file():
        raise UsageError(f"--out: {args.out} holds something other than an earlier report: choose a new directory")
    report = assemble_report(find_run_dirs(args.runs), args.out, allow_partial=args.allow_partial)
    if report.partial:
        print(
            f"batchbench: warning: PARTIAL report: {len(report.partial)} runs do not answer for their plan",
            file=sys.stderr,
        )
    if not report.usable:
        print("batchbench: warning: UNSTABLE cells: see the report's headline", file=sys.stderr)
    print(report.paths.html)
    return 0
