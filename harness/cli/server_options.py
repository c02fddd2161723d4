"""The server options of every command that may launch vLLM, and the `ServerSpec` they make."""

from __future__ import annotations

import argparse

from launchers import Mode, ServerSpec
from launchers.layout import LAYOUTS

# Only for a launched server: against an endpoint, no --model means the endpoint's only model.
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


def server_spec(args: argparse.Namespace, mode: Mode, port: int | None = None) -> ServerSpec:
    """The server `add_server_arguments`' options describe, in `mode` (port None: a free one).

    Raises UsageError for a bad value (ServerSpec validates itself).
    """
    return ServerSpec(
        mode=mode,
        model=DEFAULT_MODEL if args.model is None else args.model,
        max_num_seqs=args.max_num_seqs,
        host=args.host,
        port=port,
        extra_args=tuple(args.vllm_arg),
        batch_wait_s=args.batch_wait_s,
        kv_cache_bytes=args.kv_cache_bytes,
        startup_timeout_s=args.startup_timeout_s,
        layout=args.layout,
    )
