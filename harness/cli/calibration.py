"""`batchbench calibration-endpoint`: serve the zero-cost streaming endpoint that calibrates the client.

For measuring the load client's own ceiling only; it never says anything about a server
(harness.calibration). The endpoint runs on a clean asyncio (uvloop) loop in this
process, which gevent does not patch (it drives no load).
"""

from __future__ import annotations

import argparse

from harness.calibration.__main__ import add_arguments, serve_until_interrupted
from harness.calibration.null_stream import NullStreamServer


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibration-endpoint",
        help="serve a zero-cost OpenAI-style streaming endpoint, to measure the client's own ceiling (not a server)",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    server = NullStreamServer(args.model, args.tokenizer, args.step_interval_s)
    return serve_until_interrupted(args.host, args.port, server)
