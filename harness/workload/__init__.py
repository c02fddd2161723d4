"""Workloads: specs (YAML), length distributions, deterministic request plans, prompts."""

from harness.workload.distributions import (
    ChoiceLength,
    ExponentialLength,
    FileLength,
    FixedLength,
    LengthDistribution,
    NormalLength,
    UniformLength,
)
from harness.workload.plan import CLOSED_LOOP_REQUESTS_PER_USER_SECOND, PlannedRequest, RequestPlan, build_plan
from harness.workload.prompts import PromptFactory, TokenizerLike, make_prompts
from harness.workload.spec import (
    Arrival,
    BurstArrival,
    ClosedLoopArrival,
    PoissonArrival,
    SloMs,
    WorkloadSpec,
    load_spec,
    load_specs,
)

__all__ = [
    "CLOSED_LOOP_REQUESTS_PER_USER_SECOND",
    "Arrival",
    "BurstArrival",
    "ChoiceLength",
    "ClosedLoopArrival",
    "ExponentialLength",
    "FileLength",
    "FixedLength",
    "LengthDistribution",
    "NormalLength",
    "PlannedRequest",
    "PoissonArrival",
    "PromptFactory",
    "RequestPlan",
    "SloMs",
    "TokenizerLike",
    "UniformLength",
    "WorkloadSpec",
    "build_plan",
    "load_spec",
    "load_specs",
    "make_prompts",
]
