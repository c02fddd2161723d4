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
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from harness.cli.flags import usage_error, values_of
from harness.errors import UsageError
from harness.jobs.fields import MAX_REPETITIONS, Address, ExistingDir, OutDir, OutFile, Positive
from harness.jobs.gpu_check import GpuCheck
from harness.jobs.night import Night
from harness.jobs.rate_sweep import RateSweep
from harness.jobs.reproduce import Reproduction
from harness.jobs.run import RunJob
from harness.workload.limits import Batch, NonNegativeSeconds, Seconds, Share
from launchers import ServerConfig


class _Options(BaseModel):
    # Other attributes of the namespace (strings, flags, handlers) are argparse's to check.
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)


class ServeOptions(_Options):
    port: Annotated[int, Strict(), Field(ge=1, le=65535)] | None


class CalibrationEndpointOptions(_Options):
    port: Annotated[int, Strict(), Field(ge=0, le=65535)]
    step_interval_s: Annotated[float, Strict(), Field(ge=0, le=60, allow_inf_nan=False)]
    tokenizer: ExistingDir | None


class WorkerOptions(_Options):
    master: Address
    connect_timeout_s: Seconds


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
    "run": (ServerConfig, RunJob),
    "worker": (WorkerOptions,),
    "reproduce": (ServerConfig, Reproduction),
    "sweep-rates": (ServerConfig, RateSweep),
    "analyze": (AnalyzeOptions,),
    "gate": (GateOptions,),
    "nightly": (Night, GateOutputs),
    "predict": (PredictOptions,),
    "gpu-check": (GpuCheck,),
}


def check_options(args: argparse.Namespace) -> None:
    """Validate the parsed values of `args.command`; UsageError naming the first bad flag."""
    for model in OPTIONS.get(args.command, ()):
        try:
            model.model_validate(values_of(model, args))
        except ValidationError as exc:
            raise usage_error(exc, model) from exc
