"""Flags generated from typed settings: a job's config or `launchers.ServerConfig`.

Each field of a pydantic model becomes one flag: its name, type, default, choices and help
come from the field, so a setting is declared once, in the model, and checked by it. The
rules: `a_b` is `--a-b`; a bool that defaults to False is a switch, one that defaults to
True is turned off by `--no-a-b`; a tuple is one comma-separated value, or a repeatable flag
where the field's `json_schema_extra` says `repeatable`; a Literal offers its values as
choices; a bool that defaults to None is `--a-b` or `--no-a-b`, unset leaving the choice to
the job. That dict may also name the `flag` (another than the field's name) or a
`metavar`, or say `cli: False` to keep a field off the command line.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from harness.errors import UsageError

M = TypeVar("M", bound=BaseModel)

# Options whose attribute is not their flag's name: `json` would shadow BaseModel.json, and
# B is `batch_size` in code but --max-num-seqs, vLLM's name, on every command.
FLAGS = {"json_file": "--json", "vllm_args": "--vllm-arg", "batch_size": "--max-num-seqs"}


def flag_of(name: str) -> str:
    """The command-line flag of option attribute `name`."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def add_model_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, model: type[BaseModel],
                        skip: Iterable[str] = ()) -> None:
    """One flag per field of `model` (but `skip` and fields marked `cli: False`), in field order."""
    left_out = set(skip)
    for name, field in model.model_fields.items():
        if name not in left_out and _extra(field).get("cli", True):
            flag, keywords = argument_of(name, field)
            parser.add_argument(flag, dest=name, **keywords)


def flag_of_field(name: str, field: FieldInfo) -> str:
    """The flag of field `name`: its own `flag`, else the one its name gives (flag_of)."""
    return str(_extra(field).get("flag") or flag_of(name))


def argument_of(name: str, field: FieldInfo) -> tuple[str, dict[str, Any]]:
    """The flag of field `name` and argparse's keywords for it."""
    # argparse %-formats help text.
    description = (field.description or "").replace("%", "%%")
    kind = value_type(field.annotation)
    extra = _extra(field)
    flag = flag_of_field(name, field)
    metavar = {"metavar": extra["metavar"]} if "metavar" in extra else {}
    if get_origin(kind) is tuple:
        (item,) = {arg for arg in get_args(kind) if arg is not Ellipsis}
        if extra.get("repeatable"):
            return flag, {"action": "append", "default": [], "metavar": "ARG", "help": f"{description} (repeatable)"}
        shown = ",".join(map(_shown, field.default or ()))
        return flag, {"type": _comma_separated(flag, item), "default": field.default, **metavar,
                      "help": _with_default(description, field, shown)}
    if kind is bool:
        if field.default is None:
            return flag, {"action": argparse.BooleanOptionalAction, "default": None, "help": description}
        if field.default is True:
            return "--no-" + name.replace("_", "-"), {"action": "store_false", "default": True, "help": description}
        return flag, {"action": "store_true", "default": False, "help": description}
    keywords: dict[str, Any] = {"default": None if field.is_required() else field.default,
                                "help": _with_default(description, field), **metavar}
    if field.is_required():
        keywords["required"] = True
    if get_origin(kind) is Literal:
        keywords["choices"] = get_args(kind)
    elif kind in (int, float, Path):
        keywords["type"] = kind
    return flag, keywords


def values_of(model: type[BaseModel], args: argparse.Namespace) -> dict[str, Any]:
    """The values of `model`'s fields in `args`, an unset flag leaving a field its default.

    Raises UsageError when a field has no option in `args` (a misspelled field would
    otherwise go unchecked).
    """
    values = vars(args)
    missing = [name for name in model.model_fields if name not in values and _extra(model.model_fields[name])
               .get("cli", True)]
    if missing:
        flag = flag_of_field(missing[0], model.model_fields[missing[0]])
        raise UsageError(f"{args.command}: {model.__name__}.{missing[0]} has no {flag} option to check")
    return {
        name: values[name] for name, field in model.model_fields.items()
        if name in values and (values[name] is not None or field.is_required())
    }


def model_of(model: type[M], args: argparse.Namespace, **given: Any) -> M:
    """`model` from the flags in `args` (and `given` values for fields kept off the command line).

    Raises UsageError naming the first bad flag.
    """
    try:
        return model.model_validate({**values_of(model, args), **given})
    except ValidationError as exc:
        raise usage_error(exc, model) from exc


def usage_error(exc: ValidationError, model: type[BaseModel]) -> UsageError:
    """The first problem of `model`'s validation, as one line naming its flag."""
    error = exc.errors()[0]
    message = error["msg"].removeprefix("Value error, ")
    name = str(error["loc"][0]) if error["loc"] else ""
    where = flag_of_field(name, model.model_fields[name]) if name in model.model_fields else "options"
    return UsageError(f"{where}: {message}{_echo(error)}")


def value_type(annotation: Any) -> Any:
    """The type a flag parses: `int | None` is an optional int, and constraints are the model's to check."""
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _comma_separated(flag: str, item: Any) -> Any:
    kind = value_type(item)

    def parse(text: str) -> tuple[Any, ...]:
        try:
            return tuple(kind(part.strip()) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"a comma-separated list of {kind.__name__}s, got {text!r}") from None

    parse.__name__ = f"{flag} list"
    return parse


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def _with_default(description: str, field: FieldInfo, shown: str | None = None) -> str:
    """`description` ending with the field's default: "... (default 2)"."""
    if field.is_required() or field.default is None or field.default == ():
        return description
    return f"{description} (default {shown if shown is not None else _shown(field.default)})"


def _shown(default: object) -> str:
    return f"{default:g}" if isinstance(default, float) else str(default)


def _echo(error: Any) -> str:
    value = error.get("input")
    if error["type"] == "value_error" or isinstance(value, (Path, dict)):
        return ""
    return f" (got {value!r})"
