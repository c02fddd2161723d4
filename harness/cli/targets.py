"""The flags naming servers already running, instead of launched ones (launchers.Endpoints)."""

from __future__ import annotations

import argparse

from harness.driver.backends import BACKENDS
from harness.errors import UsageError
from launchers import Endpoints


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """--endpoint, --static-endpoint, --tokenizer, and what the user states of those servers: their kind and context."""
    parser.add_argument("--endpoint", help="an already running continuous server (skips launching it); with no"
                        " --static-endpoint, static batching is kept by the client (client-static)")
    parser.add_argument("--static-endpoint", help="an already running static-batching server")
    parser.add_argument("--tokenizer", help="tokenizer directory when the endpoints' model is not local")
    parser.add_argument("--backend", choices=sorted(BACKENDS), help="the kind of server at the endpoints, which sets"
                        " how lengths are forced and tokens counted (docs/servers.md; default: vllm)")
    parser.add_argument("--max-model-len", type=int, metavar="TOKENS", help="the context of the server at --endpoint,"
                        " in tokens: checked against the one it states, used where it states none")


def endpoints_of(args: argparse.Namespace) -> Endpoints:
    """What those flags (and --model, the model an endpoint must serve) name."""
    if args.endpoint is None:
        given = [flag for flag, value in (("--backend", args.backend), ("--max-model-len", args.max_model_len))
                 if value is not None]
        if given:
            raise UsageError(f"{given[0]}: states what an attached server is; it needs --endpoint (a launched vLLM"
                             " server's context is set with --vllm-arg=--max-model-len=N)")
    if args.max_model_len is not None and args.max_model_len < 1:
        raise UsageError(f"--max-model-len: needs a positive number of tokens, got {args.max_model_len}")
    return Endpoints(args.endpoint, args.static_endpoint, args.tokenizer, args.model, args.backend, args.max_model_len)
