"""`batchbench make-trace --out FILE`: write a synthetic day of chat traffic as a trace.

The trace is drawn by harness.workload.synthetic_trace; with `--conversations` its rows are
the turns of chats (session, turn and think_s columns), for a `conversation:` replay.

For replaying a production-shaped trace without a download: a workload YAML points at the
file with `trace: {path: FILE, preset: azure}` (or mooncake, for that layout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.flags import add_model_arguments, model_of
from harness.workload.synthetic_trace import SyntheticTrace


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("make-trace", help="write a synthetic trace: a day of bursty arrivals with"
                                   " heavy-tailed, correlated prompt and output lengths")
    parser.add_argument("--out", type=Path, required=True, help="the trace file to write (it must not exist)")
    add_model_arguments(parser, SyntheticTrace)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.errors import UsageError
    from harness.jobs.fields import writable_file
    from harness.workload.synthetic_trace import write_trace

    settings = model_of(SyntheticTrace, args)
    if args.out.exists():
        raise UsageError(f"--out: {args.out} exists; the trace is written to a new file")
    try:
        writable_file(args.out)
    except ValueError as exc:
        raise UsageError(f"--out: {exc}") from None
    rows = write_trace(settings, args.out)
    print(f"{rows} rows ({settings.layout} layout) -> {args.out}")
    return 0
