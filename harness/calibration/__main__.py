"""`python -m harness.calibration`: serve the zero-cost calibration endpoint until interrupted.

Prints one line, `calibration endpoint (client calibration only) at URL`, once listening.
Runs on uvloop when it is installed (it comes with vLLM), else on asyncio's own loop:
the endpoint must cost less than the client it calibrates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable

from harness.calibration.null_stream import DEFAULT_MODEL, NullStreamServer, serve

READY_LINE = "calibration endpoint (client calibration only) at "


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The endpoint's options (shared with `batchbench calibration-endpoint`, which checks their values)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one, printed)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"served model name (default {DEFAULT_MODEL})")
    parser.add_argument("--tokenizer", help="directory advertised as the model's root, where `batchbench run` "
                        "finds a tokenizer for its prompts (e.g. `batchbench prepare-model tiny`)")
    parser.add_argument("--step-interval-s", type=float, default=0.0,
                        help="pace: one token per stream every this many seconds (default 0: as fast as possible)")


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted (`batchbench calibration-endpoint` checks the values, then serves the same way)."""
    parser = argparse.ArgumentParser(prog="python -m harness.calibration", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return serve_until_interrupted(args.host, args.port, NullStreamServer(args.model, args.tokenizer,
                                                                          args.step_interval_s))


def serve_until_interrupted(host: str, port: int, server: NullStreamServer) -> int:
    """Serve `server` at host:port on a fresh event loop until Ctrl-C or SIGTERM; prints READY_LINE once listening."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop]
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = asyncio.new_event_loop
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(server, host, port, lambda url: print(READY_LINE + url, flush=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
