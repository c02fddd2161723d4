"""Predict a workload's throughput on a GPU setup, per system, and its sensitivity to each constant.

- continuous: the engine's own schedule (harness.paper.gpu_schedule), its steps
  costed by the setup's step cost (harness.paper.gpu_cost);
- static at B: the same engine, constants and limits, with a batch of B formed only
  when the previous one has finished;
- under Poisson arrivals (predict_arrivals), continuous and static as above, each
  request's arrival, admission, first token and finish kept for its latencies;
  static's batch wait is the max batch delay of its batches (0: impatient);
- naive padded: not a vLLM schedule. Its prediction here is a floor on its time: the
  padded waves of harness.paper.simulate, every step at the card's peak bandwidth
  and FLOP/s with no overhead. A measured naive figure below it says how much HF's own
  overhead costs; nothing here models that overhead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from harness.paper.gpu_cost import GpuStepCost
from harness.paper.gpu_schedule import EngineLimits, EngineSchedule, simulate_engine
from harness.paper.gpu_setups import GpuSetup, WorkloadSettings
from harness.paper.simulate import ScheduleResult, simulate
from harness.systems import Mode
from harness.workload.plan import build_plan
from harness.workload.spec import WorkloadSpec

SENSITIVITY_STEP = 0.2


@dataclass(frozen=True)
class Scales:
    """Multipliers of the setup's constants (1.0 = as sourced); the sensitivity table moves one at a time."""

    efficiency: float = 1.0
    overhead: float = 1.0
    bandwidth: float = 1.0
    flops: float = 1.0
    kv_cache: float = 1.0


SCALED_CONSTANTS = tuple(f.name for f in fields(Scales))


@dataclass(frozen=True)
class PaperPrediction:
    """One workload's predictions on paper on one GPU setup, and what was published for it."""

    setup: GpuSetup
    workload: str
    batch_size: int
    max_num_batched_tokens: int
    settings: WorkloadSettings
    continuous: EngineSchedule
    static: EngineSchedule
    naive_floor: ScheduleResult

    @property
    def continuous_ratio(self) -> float | None:
        """Predicted / published continuous throughput, where a figure is published."""
        published = self.settings.published_continuous_tok_s
        return None if published is None else self.continuous.total_tokens_per_s / published

    @property
    def naive_floor_over_published(self) -> float | None:
        """How many times slower the published naive figure is than the padded schedule's floor."""
        published = self.settings.published_naive_tok_s
        return None if published is None else self.naive_floor.total_tokens_per_s / published


@dataclass(frozen=True)
class PaperArrivals:
    """One workload with timed arrivals, scheduled on paper on one GPU setup: continuous and static at B."""

    setup: GpuSetup
    workload: str
    batch_size: int
    static_batch_wait_s: float
    continuous: EngineSchedule
    static: EngineSchedule


@dataclass(frozen=True)
class SensitivityRow:
    """Continuous throughput per workload with one constant at (1 - step) and (1 + step) of its value."""

    constant: str
    low: dict[str, float]
    high: dict[str, float]


def setup_step_cost(setup: GpuSetup, scales: Scales = Scales()) -> GpuStepCost:
    """The setup's step cost, its constants scaled."""
    return GpuStepCost(
        model=setup.model,
        gpu=setup.gpu,
        efficiency=min(1.0, setup.efficiency.value * scales.efficiency),
        overhead_s=setup.overhead_s.value * scales.overhead,
        bandwidth_scale=scales.bandwidth,
        flops_scale=scales.flops,
    )


def floor_step_cost(setup: GpuSetup) -> GpuStepCost:
    """Every step at the card's peak: no efficiency loss, no overhead."""
    return GpuStepCost(model=setup.model, gpu=setup.gpu, efficiency=1.0)


def engine_limits(
    setup: GpuSetup, settings: WorkloadSettings, system: Mode, batch_size: int, scales: Scales = Scales()
) -> EngineLimits:
    """The engine's limits for one system: static batches are B wide, continuous runs the setup's width."""
    budget = settings.max_num_batched_tokens or int(setup.max_num_batched_tokens.value)
    width = batch_size if system == "static" or setup.max_num_seqs is None else int(setup.max_num_seqs.value)
    kv_blocks = int(setup.kv_tokens * scales.kv_cache) // setup.block_size
    return EngineLimits(kv_blocks, width, budget, setup.block_size, setup.watermark)


def predict_workload(
    setup: GpuSetup, spec: WorkloadSpec, batch_size: int | None = None, scales: Scales = Scales()
) -> PaperPrediction:
    """Predict continuous, static at B and the naive floor for one burst workload.

    B is `batch_size` if given, else the workload's published batch size, else the
    setup's default. Raises ValueError for a workload that is not a burst, or whose
    requests cannot fit the engine.
    """
    settings, width, prompts, outputs = _requests(setup, spec, batch_size)
    continuous, static = (
        _schedule(setup, settings, system, width, prompts, outputs, scales) for system in ("continuous", "static")
    )
    return PaperPrediction(
        setup=setup,
        workload=spec.name,
        batch_size=width,
        max_num_batched_tokens=continuous.limits.max_num_batched_tokens,
        settings=settings,
        continuous=continuous,
        static=static,
        naive_floor=simulate("naive", outputs, width, floor_step_cost(setup), prompt_tokens=prompts),
    )


def predict_arrivals(
    setup: GpuSetup, spec: WorkloadSpec, settings: WorkloadSettings, batch_size: int | None = None,
    static_batch_wait_s: float = 0.0,
) -> PaperArrivals:
    """Schedule one workload whose requests arrive over time (Poisson) on continuous and on static at B.

    `settings`: the published experiment's settings for the workload (its token budget and
    B); B is `batch_size` if given. Raises ValueError for a burst workload (use
    predict_workload) or requests that cannot fit the engine.
    """
    if spec.arrival.kind == "burst":
        raise ValueError(f"{spec.name}: a burst has no arrivals over time; predict_workload predicts it")
    plan = build_plan(spec).to_frame()
    prompts, outputs = plan["prompt_tokens"].to_numpy(), plan["output_tokens"].to_numpy()
    arrivals = plan["arrival_s"].to_numpy(dtype=float)
    width = batch_size or settings.batch_size
    continuous, static = (
        simulate_engine(system, prompts, outputs, engine_limits(setup, settings, system, width),
                        setup_step_cost(setup), arrivals=arrivals, static_batch_wait_s=static_batch_wait_s)
        for system in ("continuous", "static")
    )
    return PaperArrivals(setup, spec.name, width, static_batch_wait_s, continuous, static)


def sensitivity(
    setup: GpuSetup, specs: Sequence[WorkloadSpec], batch_size: int | None = None, step: float = SENSITIVITY_STEP
) -> list[SensitivityRow]:
    """Continuous throughput with each constant in turn at (1 - step) and (1 + step) of its value."""
    requests = {spec.name: _requests(setup, spec, batch_size) for spec in specs}

    def tok_s(scales: Scales) -> dict[str, float]:
        return {
            name: _schedule(setup, settings, "continuous", width, prompts, outputs, scales).total_tokens_per_s
            for name, (settings, width, prompts, outputs) in requests.items()
        }

    return [
        SensitivityRow(
            constant=name,
            low=tok_s(replace(Scales(), **{name: 1 - step})),
            high=tok_s(replace(Scales(), **{name: 1 + step})),
        )
        for name in SCALED_CONSTANTS
    ]


def _requests(
    setup: GpuSetup, spec: WorkloadSpec, batch_size: int | None
) -> tuple[WorkloadSettings, int, np.ndarray, np.ndarray]:
    """The workload's settings on this setup, its B, and its planned prompt and output lengths."""
    if spec.arrival.kind != "burst":
        raise ValueError(f"{spec.name}: predict needs a burst workload (every request sent at once), "
                         f"got arrival {spec.arrival.kind}")
    settings = setup.settings(spec.name)
    plan = build_plan(spec).to_frame()
    prompts, outputs = plan["prompt_tokens"].to_numpy(), plan["output_tokens"].to_numpy()
    return settings, batch_size or settings.batch_size, prompts, outputs


def _schedule(
    setup: GpuSetup, settings: WorkloadSettings, system: Mode, width: int, prompts: np.ndarray,
    outputs: np.ndarray, scales: Scales,
) -> EngineSchedule:
    limits = engine_limits(setup, settings, system, width, scales)
    return simulate_engine(system, prompts, outputs, limits, setup_step_cost(setup, scales))
