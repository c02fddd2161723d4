"""The server flags of every command that may launch vLLM, generated from `ServerConfig`.

Each field of `launchers.ServerConfig` becomes one flag: its name, type, default, choices
and help come from the field, so a parameter is declared once, in the model.
"""

from __future__ import annotations

import argparse
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from harness.cli.options import cli_values, flag_of
from harness.systems import Mode
from launchers import ServerConfig, ServerSpec

# Against an endpoint --model names the served model instead, so the flag itself defaults to unset.
ENDPOINT_MODEL_HELP = "; against an endpoint: the served model name, which must be served (default: its only model)"


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Server options shared by every command that launches vLLM: one per field of `ServerConfig`."""
    for name, field in ServerConfig.model_fields.items():
        parser.add_argument(flag_of(name), dest=name, **server_argument(name, field))


def server_argument(name: str, field: FieldInfo) -> dict[str, Any]:
    """argparse's keywords for the flag of `ServerConfig` field `name`."""
    # argparse %-formats help text.
    description = (field.description or "").replace("%", "%%")
    kind = _value_type(field.annotation)
    if get_origin(kind) is tuple:
        return {"action": "append", "default": [], "metavar": "ARG", "help": f"{description} (repeatable)"}
    shown = "" if field.default is None else f" (default {_shown(field.default)})"
    if name == "model":
        return {"default": None, "help": f"launching: {description}{shown}{ENDPOINT_MODEL_HELP}"}
    if kind is bool:
        return {"action": "store_true", "default": field.default, "help": description}
    keywords: dict[str, Any] = {"default": field.default, "help": description + shown}
    if get_origin(kind) is Literal:
        keywords["choices"] = get_args(kind)
    elif kind is not str:
        keywords["type"] = kind
    return keywords


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server configuration `add_server_arguments`' options describe (checked with every option)."""
    return ServerConfig(**cli_values(ServerConfig, args))


def server_spec(args: argparse.Namespace, mode: Mode, port: int | None = None) -> ServerSpec:
    """The server `add_server_arguments`' options describe, in `mode` (port None: a free one).

    Raises UsageError for a bad value (ServerSpec validates itself).
    """
    return ServerSpec(mode=mode, port=port, **cli_values(ServerConfig, args))


def _value_type(annotation: Any) -> Any:
    """The type a flag parses: `int | None` is an optional int, and constraints are the model's to check."""
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _shown(default: object) -> str:
    return f"{default:g}" if isinstance(default, float) else str(default)
