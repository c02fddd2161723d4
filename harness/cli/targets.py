"""The flags naming servers already running, instead of launched ones (launchers.Endpoints)."""

from __future__ import annotations

import argparse

from launchers import Endpoints


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """--endpoint, --static-endpoint and --tokenizer: servers already running instead of launched ones."""
    parser.add_argument("--endpoint", help="an already running continuous server (skips launching it)")
    parser.add_argument("--static-endpoint", help="an already running static-batching server")
    parser.add_argument("--tokenizer", help="tokenizer directory when the endpoints' model is not local")


def endpoints_of(args: argparse.Namespace) -> Endpoints:
    """What those flags (and --model, the model an endpoint must serve) name."""
    return Endpoints(args.endpoint, args.static_endpoint, args.tokenizer, args.model)
