"""Nightly suites: which workloads, systems and repetitions a night runs, and how it is gated.

A suite file is YAML, validated here (the one boundary where its errors become a
one-line `UsageError`, like workload files). Shipped suites live in workloads/suites/
and load by bare name (`cpu-nightly`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.errors import UsageError
from harness.gate.rule import BASELINE_NIGHTS, DEFAULT_RULE
from harness.systems import HF_SYSTEMS, VLLM_SERVER_MODE, Mode, SystemName
from harness.validation import describe_validation_error
from harness.workload import WorkloadSpec, load_specs
from harness.workload.limits import Share
from launchers.spec import Endpoints, ServerConfig
from launchers.transformers_server import check_servable
from workloads import SUITES_DIR, list_builtin_suites

Count = Annotated[int, Strict(), Field(ge=1, le=100)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Suite files written before the rename say `trials` and `extra_trials`; they load under
# those names too. Both spellings in one file are refused: the one not used is an extra key.
class GatePolicy(_Frozen):
    """How tonight's repetitions are judged against the rolling baseline (harness.gate.statistics)."""

    threshold: Share = Field(DEFAULT_RULE.threshold, description="Smallest drop of the median called a regression"
                             " (a share: 0.10 is 10%).")
    baseline_nights: Count = Field(
        BASELINE_NIGHTS, description="The rolling baseline: the last this many accepted nights of the same"
        " configuration.")
    extra_repetitions: Annotated[int, Strict(), Field(ge=0, le=100)] = Field(
        2, validation_alias=AliasChoices("extra_repetitions", "extra_trials"),
        description="Budget: repetitions added to each inconclusive configuration before giving up (0: none).")


class Suite(_Frozen):
    """A night's benchmark: workloads x systems x repetitions, on one server, gated."""

    kind: Literal["suite"] = Field(description="File tag: a suite, not a workload.")
    name: str = Field(min_length=1, description="Short identifier, used in the history and the reports.")
    description: str = Field("", description="What the suite guards and what it costs to run.")
    workloads: tuple[str, ...] = Field(min_length=1, description="Workload names or files (as --workload takes).")
    systems: tuple[SystemName, ...] = Field(min_length=1, description="Systems measured on every workload.")
    repetitions: Count = Field(3, validation_alias=AliasChoices("repetitions", "trials"),
                               description="Runs of each (workload, system), interleaved across all of them.")
    server: ServerConfig = Field(default_factory=ServerConfig, description="The server under test.")
    endpoint: str | None = Field(
        None, min_length=1, description="Base URL of a continuous vLLM server already running, measured instead of"
        " one launched here (continuous and naive run on it); static is then measured only at static_endpoint.")
    static_endpoint: str | None = Field(
        None, min_length=1, description="Base URL of a static-batching vLLM server already running, measured"
        " instead of one launched here.")
    gate: GatePolicy = Field(default_factory=GatePolicy, description="How a night is judged.")

    @field_validator("workloads", "systems")
    @classmethod
    def _distinct(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(values)) != len(values):
            raise ValueError(f"names repeat: {', '.join(values)}")
        return values

    @model_validator(mode="after")
    def _endpoints_cover_systems(self) -> Suite:
        # vLLM's systems run on given servers or on launched ones, never on a mix of the two.
        if self.endpoint is None and self.static_endpoint is None:
            return self
        field_of: dict[Mode, str] = {"continuous": "endpoint", "static": "static_endpoint"}
        missing = [f"{system} needs {field_of[mode]}" for system in self.systems
                   if (mode := VLLM_SERVER_MODE.get(system)) and getattr(self, field_of[mode]) is None]
        if missing:
            raise ValueError(f"a suite naming an endpoint runs every vLLM system on one: {', '.join(missing)}")
        return self

    def endpoints(self) -> Endpoints:
        """The servers the suite names running; the others are launched (harness.sweep.servers.run_targets)."""
        return Endpoints(continuous=self.endpoint, static=self.static_endpoint)

    @model_validator(mode="after")
    def _servable(self) -> Suite:
        # Before any server starts: transformers serve cannot load a profile made without weights.
        if any(system in HF_SYSTEMS for system in self.systems):
            try:
                check_servable(self.server.model)
            except UsageError as exc:
                raise ValueError(str(exc)) from exc
        return self


@dataclass(frozen=True)
class LoadedSuite:
    """A validated suite, where it came from, and the workloads it names, loaded."""

    suite: Suite
    path: Path
    specs: tuple[WorkloadSpec, ...]


def load_suite(source: str | os.PathLike[str]) -> LoadedSuite:
    """A suite from a YAML file or a shipped name, with every workload it names loaded.

    Workload files are looked up relative to the suite file first, then as shipped names.
    Raises `UsageError` with one line naming the file and field on any bad input.
    """
    path = Path(source)
    if not path.is_file():
        if len(path.parts) == 1 and path.stem in list_builtin_suites():
            path = SUITES_DIR / f"{path.stem}.yaml"
        else:
            raise UsageError(f"{source}: no such suite file, and no shipped suite of that name"
                             f" (shipped: {', '.join(list_builtin_suites())})")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: not a readable YAML suite ({type(exc).__name__})") from exc
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {describe_validation_error(exc, data)}") from exc
    sources = [path.parent / name if (path.parent / name).is_file() else name for name in suite.workloads]
    return LoadedSuite(suite, path, tuple(load_specs(sources)))
