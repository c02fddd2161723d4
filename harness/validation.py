"""One-line messages for pydantic validation errors, for every boundary that validates
user input (workload files, plans, manifests, report extras) and raises `UsageError`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def describe_validation_error(exc: ValidationError, data: Any = None) -> str:
    """Render a pydantic error as one line of `field.path: message` parts.

    With the validated input `data`, union tags pydantic puts in the location
    (`output_tokens.exponential.cap`) are dropped, leaving the path the user wrote.
    """
    parts = []
    for error in exc.errors():
        field = ".".join(_written_path(error["loc"], data))
        message = error["msg"].removeprefix("Value error, ")
        if _worth_echoing(error):
            message += f" (got {error['input']!r})"
        parts.append(f"{field}: {message}" if field else message)
    return "; ".join(parts)


# Error types whose input is not worth echoing: our own messages already quote it, and
# an unknown key's value says nothing about the key.
_NO_ECHO = {"value_error", "extra_forbidden"}
# Longer inputs (a whole JSON document, say) would swamp the one-line message.
_MAX_ECHO = 60


def _worth_echoing(error: ErrorDetails) -> bool:
    value = error["input"]
    return (
        error["type"] not in _NO_ECHO
        and isinstance(value, str | int | float)
        and len(repr(value)) <= _MAX_ECHO
    )


def _written_path(loc: tuple[int | str, ...], data: Any) -> list[str]:
    """`loc` without the union tags: a tag is a key absent from the input at that point
    that equals the input's `kind`."""
    parts, node = [], data
    for key in loc:
        if isinstance(node, dict) and key not in node and node.get("kind") == key:
            continue
        parts.append(str(key))
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            node = None
    return parts
