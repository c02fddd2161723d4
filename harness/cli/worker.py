"""`batchbench worker --master HOST[:PORT]`: one load worker of a distributed run, attached to its master.

The master is a `batchbench run --workers N --master-bind HOST:PORT` on another machine
(or this one); the worker takes its share of the run's requests from it, sends them,
and streams its rows back. It serves one run and exits (0; 130 if interrupted).
"""

from __future__ import annotations

import argparse

DEFAULT_CONNECT_TIMEOUT_S = 300.0


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "worker", help="send a distributed run's requests for its master (run --workers N --master-bind HOST:PORT)"
    )
    parser.add_argument("--master", required=True, help="HOST[:PORT] where the master listens (default port 5557)")
    parser.add_argument(
        "--connect-timeout-s", type=float, default=DEFAULT_CONNECT_TIMEOUT_S,
        help=f"give up if no master answers by then (default {DEFAULT_CONNECT_TIMEOUT_S:g})",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.driver.distributed.wire import parse_address
    from harness.driver.distributed.worker import serve

    host, port = parse_address(args.master)
    return serve(host, port, args.connect_timeout_s)
