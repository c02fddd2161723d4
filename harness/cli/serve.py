"""`batchbench serve`: run one vLLM server in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import time
from typing import cast

from launchers import MODES, Mode, start
from launchers.layout import LAYOUTS

DEFAULT_MODEL = "tiny"


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Server options shared by every command that launches vLLM."""
    parser.add_argument(
        "--model",
        help="launching: tiny (default), llama-3.1-8b, opt-13b, a directory or a hub id; against an endpoint: the"
        " served model name, which must be served (default: its only model)",
    )
    parser.add_argument("--max-num-seqs", type=int, default=16, help="B: most sequences in a batch (default 16)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--batch-wait-s", type=float, default=0.0, help="static mode: wait this long for a full batch")
    parser.add_argument("--kv-cache-bytes", type=int, default=None, help="KV cache size (CPU default: 1 GiB)")
    parser.add_argument("--startup-timeout-s", type=float, default=600.0, help="give up if not ready by then")
    parser.add_argument(
        "--layout",
        default="auto",
        choices=LAYOUTS,
        help="process layout: engine-with-worker pins vLLM's spinning engine core beside its worker so the client"
        " and API server get CPU (auto: engine-with-worker on machines of <= 4 cores; see launchers/layout.py)",
    )
    parser.add_argument(
        "--vllm-arg", action="append", default=[], metavar="ARG", help="extra vLLM argument (repeatable)"
    )


def start_from_args(args: argparse.Namespace, mode: Mode, log_dir=None, port: int | None = None, progress=None):
    """Start a server from the options `add_server_arguments` defined."""
    return start(
        mode,
        args.model or DEFAULT_MODEL,
        args.max_num_seqs,
        port=port,
        host=args.host,
        extra_args=args.vllm_arg,
        batch_wait_s=args.batch_wait_s,
        kv_cache_bytes=args.kv_cache_bytes,
        startup_timeout_s=args.startup_timeout_s,
        layout=args.layout,
        log_dir=log_dir,
        progress=progress,
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run a vLLM server (continuous or static) until Ctrl-C")
    parser.add_argument("--mode", required=True, help=f"one of {', '.join(MODES)}")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # --mode is free text; `start` rejects an unknown one (ServerSpec raises UsageError).
    mode = cast(Mode, args.mode)
    with start_from_args(args, mode, port=args.port) as server:
        print(
            f"serving {server.served_model} ({args.mode}, max-num-seqs {args.max_num_seqs}) at {server.base_url}",
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
