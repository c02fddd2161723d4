"""`batchbench analyze`: the report of run directories made earlier (here or elsewhere)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import UsageError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("analyze", help="analyse run directories and render the report")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (or a sweep's runs/ directory)")
    parser.add_argument("--out", type=Path, required=True, help="report directory")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="analyse runs that lack rows or hold failed requests; the report then says PARTIAL on its first line",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.records import MANIFEST_FILE
    from harness.report.assemble import assemble_report

    if args.out.is_dir() and any(args.out.iterdir()) and not (args.out / "report.md").is_file():
        raise UsageError(f"--out: {args.out} holds something other than an earlier report: choose a new directory")
    run_dirs = []
    for path in args.runs:
        if not path.is_dir():
            raise UsageError(f"not a directory: {path}")
        if (path / MANIFEST_FILE).exists():
            run_dirs.append(path)
        else:
            # A sweep's runs/ directory: every run directly inside it.
            run_dirs += sorted(p for p in path.iterdir() if (p / MANIFEST_FILE).exists())
    if not run_dirs:
        raise UsageError(f"no run directories (with {MANIFEST_FILE}) in {', '.join(map(str, args.runs))}")
    report = assemble_report(run_dirs, args.out, allow_partial=args.allow_partial)
    if report.partial:
        print(
            f"batchbench: warning: PARTIAL report: {len(report.partial)} runs do not answer for their plan",
            file=sys.stderr,
        )
    if not report.stable:
        print("batchbench: warning: UNSTABLE cells: see the report's headline", file=sys.stderr)
    print(report.paths.html)
    return 0
