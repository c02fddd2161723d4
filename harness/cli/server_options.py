"""The server flags of every command that may launch vLLM, generated from `ServerConfig` (harness.cli.flags)."""

from __future__ import annotations

import argparse

from harness.cli.flags import argument_of, values_of
from harness.systems import Mode
from launchers import ServerConfig, ServerSpec

# Against an endpoint --model names the served model instead, so the flag itself defaults to unset.
ENDPOINT_MODEL_HELP = "; against an endpoint: the served model name, which must be served (default: its only model)"


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Server options shared by every command that launches vLLM: one per field of `ServerConfig`."""
    for name, field in ServerConfig.model_fields.items():
        flag, keywords = argument_of(name, field)
        if name == "model":
            keywords = {"default": None, "help": f"launching: {keywords['help']}{ENDPOINT_MODEL_HELP}"}
        parser.add_argument(flag, dest=name, **keywords)


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server configuration `add_server_arguments`' options describe (checked with every option)."""
    return ServerConfig(**values_of(ServerConfig, args))


def server_spec(args: argparse.Namespace, mode: Mode, port: int | None = None) -> ServerSpec:
    """The server `add_server_arguments`' options describe, in `mode` (port None: a free one).

    Raises UsageError for a bad value (ServerSpec validates itself).
    """
    return ServerSpec(mode=mode, port=port, **values_of(ServerConfig, args))
