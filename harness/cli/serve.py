"""`batchbench serve`: run one vLLM server in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import time
from typing import cast

from harness.cli.server_options import add_server_arguments, server_spec
from harness.systems import MODES, Mode
from launchers import start


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run a vLLM server (continuous or static) until Ctrl-C")
    parser.add_argument("--mode", required=True, help=f"one of {', '.join(MODES)}")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # --mode is free text; the spec rejects an unknown one (ServerSpec raises UsageError).
    spec = server_spec(args, cast(Mode, args.mode), port=args.port)
    with start(spec) as server:
        print(
            f"serving {server.served_model} ({spec.mode}, max-num-seqs {spec.max_num_seqs}) at {server.base_url}",
            flush=True,
        )
        print(f"log: {server.log_path}  (Ctrl-C to stop)", flush=True)
        try:
            while True:
                server.check()
                time.sleep(1)
        except KeyboardInterrupt:
            print("stopping", flush=True)
    return 0
