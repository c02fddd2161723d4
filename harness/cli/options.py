"""The one validation layer for command-line values: every command's options, checked at once.

argparse turns text into numbers; these pydantic models then say whether each number is
finite, in range and of the right type, and whether each output path can be written.
`check_options` runs right after parsing, before any model, tokenizer or server is
touched, and turns the first problem into a one-line UsageError naming the flag. The
server flags are checked by the model they are generated from (launchers.ServerConfig).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from harness.driver.distributed.wire import parse_address
from harness.errors import UsageError
from harness.workload.limits import MAX_REQUESTS, Batch, NonNegativeSeconds, Seconds, Share
from launchers import ServerConfig

MAX_REPETITIONS = 1_000
# Load worker processes of one run (--workers): far past what one client machine runs.
MAX_WORKERS = 256

Positive = Annotated[int, Strict(), Field(gt=0)]


def writable_destination(path: Path) -> Path:
    """A path a command may create a directory at: not a file, not under one, in a writable place."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is a file, not a directory")
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{path} lies under {ancestor}, which is a file")
    probe = path if path.exists() else ancestor
    # Try it: permission bits do not bind root, and a read-only or special file system
    # refuses whatever they say. The probe directory is removed at once.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".batchbench-probe-", dir=probe))
    except OSError as exc:
        raise ValueError(f"cannot create anything in {probe}: {exc.strerror or exc}") from exc
    return path


OutDir = Annotated[Path, AfterValidator(writable_destination)]


def writable_file(path: Path) -> Path:
    """A file a command may write: not a directory, in a directory it can create or write."""
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a file")
    writable_destination(path.parent)
    return path


OutFile = Annotated[Path, AfterValidator(writable_file)]


def existing_directory(path: str) -> str:
    """A directory that is there (a tokenizer is read from one; nothing is downloaded)."""
    if not Path(path).expanduser().is_dir():
        raise ValueError(f"{path} is not a directory")
    return path


ExistingDir = Annotated[str, AfterValidator(existing_directory)]


def network_address(text: str) -> str:
    """HOST[:PORT] with a host that resolves (harness.driver.distributed.wire.parse_address)."""
    parse_address(text)
    return text


Address = Annotated[str, AfterValidator(network_address)]
Workers = Annotated[int, Strict(), Field(gt=0, le=MAX_WORKERS)]


class _Options(BaseModel):
    # Other attributes of the namespace (strings, flags, handlers) are argparse's to check.
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)


class ServeOptions(_Options):
    port: Annotated[int, Strict(), Field(ge=1, le=65535)] | None


class CalibrationEndpointOptions(_Options):
    port: Annotated[int, Strict(), Field(ge=0, le=65535)]
    step_interval_s: Annotated[float, Strict(), Field(ge=0, le=60, allow_inf_nan=False)]
    tokenizer: ExistingDir | None


class RunOptions(_Options):
    out: OutDir
    history: OutFile | None
    tokenizer: ExistingDir | None
    telemetry_interval_s: Seconds
    stall_timeout_s: Seconds
    first_byte_timeout_s: Seconds
    max_users: Positive = Field(le=MAX_REQUESTS)
    workers: Workers
    master_bind: Address | None


class WorkerOptions(_Options):
    master: Address
    connect_timeout_s: Seconds


class ReproduceOptions(_Options):
    out: OutDir | None
    history: OutFile | None
    tokenizer: ExistingDir | None
    repetitions: Positive = Field(le=MAX_REPETITIONS)
    workers: Workers


class SweepRatesOptions(_Options):
    out: OutDir | None
    tokenizer: ExistingDir | None
    warmup_s: NonNegativeSeconds
    measure_s: Seconds = Field(ge=1)
    saturation_requests: Positive = Field(le=MAX_REQUESTS)
    slo_ttft_p50_s: Seconds
    slo_e2e_p99_s: Seconds
    budget_min: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)] | None
    extra_rates: Annotated[int, Strict(), Field(ge=0, le=10)]
    refine_runs: Annotated[int, Strict(), Field(ge=0, le=10)]


class AnalyzeOptions(_Options):
    out: OutDir


class GateOutputs(_Options):
    """Where a gate verdict may be written (gate, nightly)."""

    history: OutFile | None
    junit_xml: OutFile | None
    json_file: OutFile | None
    markdown: OutFile | None


class GateOptions(GateOutputs):
    threshold: Share
    alpha: Share
    margin: Annotated[float, Strict(), Field(ge=0, lt=1, allow_inf_nan=False)]
    last: Positive = Field(le=MAX_REPETITIONS)

    @field_validator("margin")
    @classmethod
    def _below_threshold(cls, margin: float, info: ValidationInfo) -> float:
        threshold = info.data.get("threshold")
        if threshold is not None and margin >= threshold:
            raise ValueError(f"must be below --threshold {threshold}, got {margin}")
        return margin


class NightlyOptions(GateOutputs):
    out: OutDir | None
    workers: Workers


class PredictOptions(_Options):
    batch_size: Batch | None
    batch_wait_s: NonNegativeSeconds
    slo_ttft_p50_s: Seconds
    slo_e2e_p99_s: Seconds


def positive_numbers(flag: str, text: str) -> list[float]:
    """A comma-separated list of positive numbers (e.g. --rates 4,8,16); UsageError naming `flag` otherwise."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag}: a comma-separated list of numbers, got {text!r}") from None
    if not values or not all(math.isfinite(value) and value > 0 for value in values):
        raise UsageError(f"{flag}: every value must be a positive number, got {text!r}")
    return values


# Each command's options, checked in this order; the server's first, as their flags come first in --help.
OPTIONS: dict[str, tuple[type[BaseModel], ...]] = {
    "serve": (ServerConfig, ServeOptions),
    "calibration-endpoint": (CalibrationEndpointOptions,),
    "run": (ServerConfig, RunOptions),
    "worker": (WorkerOptions,),
    "reproduce": (ServerConfig, ReproduceOptions),
    "sweep-rates": (ServerConfig, SweepRatesOptions),
    "analyze": (AnalyzeOptions,),
    "gate": (GateOptions,),
    "nightly": (NightlyOptions,),
    "predict": (PredictOptions,),
}


# Options whose attribute is not their flag's name (`json` would shadow BaseModel.json).
FLAGS = {"json_file": "--json", "vllm_args": "--vllm-arg"}


def flag_of(name: str) -> str:
    """The command-line flag of option attribute `name`."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def cli_values(model: type[BaseModel], args: argparse.Namespace) -> dict[str, Any]:
    """The values of `model`'s fields in `args`, an unset flag leaving a field its default.

    Raises UsageError when a field has no option in `args` (a misspelled field would
    otherwise go unchecked).
    """
    values = vars(args)
    missing = [name for name in model.model_fields if name not in values]
    if missing:
        raise UsageError(f"{args.command}: {model.__name__}.{missing[0]} has no {flag_of(missing[0])} option to check")
    return {
        name: values[name] for name, field in model.model_fields.items()
        if values[name] is not None or field.is_required()
    }


def check_options(args: argparse.Namespace) -> None:
    """Validate the parsed values of `args.command`; UsageError naming the first bad flag."""
    for model in OPTIONS.get(args.command, ()):
        try:
            model.model_validate(cli_values(model, args))
        except ValidationError as exc:
            error = exc.errors()[0]
            message = error["msg"].removeprefix("Value error, ")
            raise UsageError(f"{flag_of(str(error['loc'][0]))}: {message}{_echo(error)}") from exc


def _echo(error: Any) -> str:
    value = error.get("input")
    if error["type"] == "value_error" or isinstance(value, Path):
        return ""
    return f" (got {value!r})"
