"""`batchbench calibration-endpoint`: serve the zero-cost streaming endpoint that calibrates the client.

For measuring the load client's own ceiling only; it never says anything about a server
(harness.calibration). The endpoint runs on a clean asyncio (uvloop) loop, so this
command checks its options and then replaces itself with `python -m harness.calibration`:
this process is patched for gevent, which must not touch the endpoint's sockets.
"""

from __future__ import annotations

import argparse
import os
import sys

from harness.calibration.__main__ import add_arguments


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibration-endpoint",
        help="serve a zero-cost OpenAI-style streaming endpoint, to measure the client's own ceiling (not a server)",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "harness.calibration", "--host", args.host, "--port", str(args.port),
            "--model", args.model, "--step-interval-s", repr(args.step_interval_s)]
    if args.tokenizer:
        argv += ["--tokenizer", args.tokenizer]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
