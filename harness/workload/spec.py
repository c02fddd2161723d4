"""Workload specs: the YAML file format, its validation, and loading it.

`load_spec` is the one boundary where YAML and pydantic errors become `UsageError`,
each a single line `<file>: <field.path>: <what is wrong>`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

import workloads
from harness.errors import UsageError
from harness.validation import describe_validation_error
from harness.workload.distributions import LengthDistribution
from harness.workload.limits import Count, PositiveFinite, Seconds, Seed
from harness.workload.trace import TraceSource


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClosedLoopArrival(_Frozen):
    """A fixed number of users, each sending its next request when the last one ends."""

    kind: Literal["closed"] = Field("closed", description="Arrival tag.")
    users: Count = Field(description="Concurrent users, i.e. requests in flight.")


class PoissonArrival(_Frozen):
    """Open-loop arrivals with gamma inter-arrival times (burstiness 1 is a Poisson process)."""

    kind: Literal["poisson"] = Field("poisson", description="Arrival tag.")
    rate: PositiveFinite = Field(description="Mean arrival rate, requests per second.")
    burstiness: PositiveFinite = Field(
        1.0,
        description="Gamma shape of the inter-arrival times (mean stays 1/rate; coefficient"
        " of variation is 1/sqrt(burstiness)): 1 is Poisson, < 1 burstier, > 1 more regular.",
    )


class BurstArrival(_Frozen):
    """Every request is sent at once, at t=0."""

    kind: Literal["burst"] = Field("burst", description="Arrival tag.")


class TraceArrival(_Frozen):
    """Each request at its own time, as its row of the workload's trace gives it (scaled by its time_scale)."""

    kind: Literal["trace"] = Field("trace", description="Arrival tag.")


Arrival = Annotated[
    ClosedLoopArrival | PoissonArrival | BurstArrival | TraceArrival, Field(discriminator="kind")
]


class SloMs(_Frozen):
    """Latency targets a request must meet to count towards goodput; unset means no target."""

    ttft_ms: PositiveFinite | None = Field(None, description="Time to first token, milliseconds.")
    tpot_ms: PositiveFinite | None = Field(
        None, description="Time per output token after the first, milliseconds."
    )
    e2e_ms: PositiveFinite | None = Field(None, description="End-to-end latency, milliseconds.")


class SharedPrefix(_Frozen):
    """A prompt prefix that requests share, as a system prompt is: part of each prompt's length."""

    tokens: Count = Field(description="Tokens of the shared prefix, counted in every prompt's length.")
    groups: Count = Field(1, description="Different prefixes: request i carries prefix i mod groups (1: one"
                          " prefix shared by all).")


class WorkloadSpec(_Frozen):
    """One workload: how many requests, their lengths, and when they arrive."""

    name: str = Field(min_length=1, description="Short identifier used in results.")
    description: str = Field("", description="What the workload models and where it comes from.")
    seed: Seed = Field(description="Seed of every random draw in the request plan.")
    num_requests: Count | None = Field(
        None, description="Number of requests. Exactly one of num_requests and duration_s (with a trace: at most"
        " this many of its first rows; default: every row of its window)."
    )
    duration_s: Seconds | None = Field(
        None,
        description="Run length in seconds instead of a request count (poisson or closed"
        " arrival only). Exactly one of num_requests and duration_s.",
    )
    endpoint: Literal["completions", "chat"] = Field(
        "completions", description="OpenAI-compatible endpoint the requests go to."
    )
    slo: SloMs = Field(default_factory=SloMs, description="Latency targets for goodput.")
    prompt_tokens: LengthDistribution = Field(description="Prompt length distribution, tokens.")
    output_tokens: LengthDistribution = Field(
        description="Output length distribution, tokens (the driver forces exactly this many)."
    )
    arrival: Arrival = Field(description="When requests are sent.")
    trace: TraceSource | None = Field(
        None, description="A trace file whose rows are the requests: their arrival times and lengths"
        " (harness.workload.trace). Arrival and lengths are then the trace's; leave them out.",
    )
    shared_prefix: SharedPrefix | None = Field(
        None, description="Prompts open with a prefix shared by all requests, or by groups of them (a system"
        " prompt); a trace brings its own prefixes (trace.block_tokens)."
    )
    prefix_cache: bool = Field(
        False, description="Run vLLM with its prefix cache on (both modes alike), so shared prefixes are computed"
        " once; the report then gives the cache's hit rate beside the plan's own reuse. Off: every prompt token is"
        " computed, as in the experiment reproduced."
    )
    scaled_from: str | None = Field(
        None,
        description="Name of the published workload this is a smaller variant of."
        " Requires scaling.",
    )
    scaling: str | None = Field(
        None, description="What was scaled from scaled_from, and why. Requires scaled_from."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_trace(cls, data: Any) -> Any:
        # A trace gives arrivals and lengths: its YAML names only the trace.
        if isinstance(data, dict) and data.get("trace") is not None:
            defaults = {"arrival": {"kind": "trace"}, "prompt_tokens": {"kind": "trace"},
                        "output_tokens": {"kind": "trace"}}
            return {**defaults, **data}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        traced = [name for name, kind in (("arrival", self.arrival.kind), ("prompt_tokens", self.prompt_tokens.kind),
                                          ("output_tokens", self.output_tokens.kind)) if kind == "trace"]
        if self.trace is not None:
            # A burst of the trace's rows (its lengths, sent at once) is a rate sweep's saturation run.
            untraced = [name for name in ("arrival", "prompt_tokens", "output_tokens")
                        if name not in traced and not (name == "arrival" and self.arrival.kind == "burst")]
            if untraced:
                raise ValueError(f"{untraced[0]}: a trace workload takes its arrivals and lengths from the trace:"
                                 f" leave {untraced[0]} out")
            if self.duration_s is not None:
                raise ValueError("duration_s: a trace is cut by its window_s (and num_requests), not duration_s")
            if self.shared_prefix is not None:
                raise ValueError("shared_prefix: a trace brings its own prefixes: map its hash_ids column and give"
                                 " trace.block_tokens")
            return self._scaling_consistent()
        if traced:
            raise ValueError(f"{traced[0]}: kind trace needs a trace: section naming the file")
        if (self.num_requests is None) == (self.duration_s is None):
            given = "neither" if self.num_requests is None else "both"
            raise ValueError(f"num_requests, duration_s: give exactly one (got {given})")
        if self.duration_s is not None and self.arrival.kind == "burst":
            raise ValueError(
                "duration_s: needs arrival kind poisson or closed (burst sends every request at"
                " t=0, so give num_requests)"
            )
        return self._scaling_consistent()

    def _scaling_consistent(self) -> WorkloadSpec:
        if (self.scaled_from is None) != (self.scaling is None):
            missing = "scaling" if self.scaling is None else "scaled_from"
            raise ValueError(f"{missing}: required when the other of scaled_from/scaling is given")
        return self


def load_spec(source: str | os.PathLike[str]) -> WorkloadSpec:
    """Load a workload from a YAML file, or from a builtin name such as "anyscale-cap128".

    Raises `UsageError` (one line naming the file and field) on any bad input.
    """
    path = _locate(source)
    data = _read_yaml(path)
    try:
        return WorkloadSpec.model_validate(data, context={"base_dir": path.parent})
    except ValidationError as exc:
        raise UsageError(f"{path}: {describe_validation_error(exc, data)}") from exc


def load_specs(sources: Iterable[str | os.PathLike[str]]) -> list[WorkloadSpec]:
    """Load several workloads (a sweep), refusing two with the same name."""
    specs: list[WorkloadSpec] = []
    seen: dict[str, str] = {}
    for source in sources:
        spec = load_spec(source)
        if spec.name in seen:
            raise UsageError(
                f"{source}: name: {spec.name!r} is already used by {seen[spec.name]}"
            )
        seen[spec.name] = str(source)
        specs.append(spec)
    return specs


def _locate(source: str | os.PathLike[str]) -> Path:
    path = Path(source)
    if path.is_file():
        return path
    # A bare name that is not a file here is looked up among the shipped workloads.
    if len(path.parts) == 1 and path.stem in workloads.list_builtin_workloads():
        return workloads.builtin_workload_path(path.stem)
    if path.exists():
        raise UsageError(f"{source}: not a file")
    raise UsageError(
        f"{source}: no such file, and no builtin workload of that name (builtins:"
        f" {', '.join(workloads.list_builtin_workloads())})"
    )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: {_describe_yaml_error(exc)}") from exc
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise UsageError(f"{path}: expected a mapping of workload fields (got {got})")
    return data


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"invalid YAML: {where}{' '.join(problem.split())}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, which PyYAML would silently overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            # Merge (<<) and complex keys are left to SafeLoader, which handles or rejects them.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_MERGE_TAG = "tag:yaml.org,2002:merge"
