"""`batchbench run`: drive one workload against a server and write a run directory (harness.jobs.run).

This module only parses: the flags (from the job's config), then the job's result as an
exit code: 0 when every owed request has one ok row, else 1 with one line saying why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.flags import add_model_arguments, model_of
from harness.cli.history_options import add_history_arguments, history_path
from harness.cli.server_options import add_server_arguments, server_config
from harness.jobs.run import RunJob, RunResult


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="run one workload with Locust and record every request")
    fields = RunJob.model_fields
    parser.add_argument("--workload", required=True, help=fields["workload"].description)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", help=fields["endpoint"].description)
    target.add_argument("--launch", help=fields["launch"].description)
    add_model_arguments(parser, RunJob, skip=("workload",))
    add_history_arguments(parser)
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.jobs.run import run_workload

    server = server_config(args)
    job = model_of(RunJob, args, endpoint=args.endpoint, launch=args.launch, served_model=args.model,
                   history=history_path(args))
    result = run_workload(job, server)
    # Said at the end of every run, not only in a later report: a client-bound figure is the client's.
    for reason in result.client_bound:
        print(f"batchbench: warning: {reason}", file=sys.stderr)
    counts = result.outcome.counts
    if counts.inexact:
        print(
            f"batchbench: warning: {counts.inexact} of {counts.ok} ok requests are not known to have the length asked"
            f" for (--backend {result.backend}; length_exact in {job.out / 'records.parquet'})",
            file=sys.stderr,
        )
    return exit_code(result, job.allow_length_mismatch, job.out)


def exit_code(result: RunResult, allow_length_mismatch: bool, out: Path) -> int:
    """0 when every owed request has one ok row; else 1, with one line saying why."""
    outcome = result.outcome
    counts = outcome.counts
    if outcome.row_problems:
        print(f"batchbench: rows of {out} do not match its plan: {'; '.join(outcome.row_problems)}", file=sys.stderr)
        return 1
    tolerated = counts.failures.get("length_mismatch", 0) if allow_length_mismatch else 0
    if counts.failed > tolerated:
        kinds = ", ".join(f"{n} {kind}" for kind, n in counts.failures.items())
        hint = " (--allow-length-mismatch to accept those)" if "length_mismatch" in counts.failures else ""
        print(
            f"batchbench: {counts.failed} of {counts.planned - counts.not_due} requests failed: {kinds}{hint}"
            f" (see error_kind and error in {out / 'records.parquet'})",
            file=sys.stderr,
        )
        return 1
    return 0
