"""How long each run of a job takes on this machine, estimated before it runs.

A run lasts its plan's makespan, simulated (harness.paper.simulate) with a step cost
fitted on this machine's engine steps, plus a fixed overhead per run that the engine's
steps do not see: building the plan and its prompts, starting the load client, waiting
for the last stream to close, writing the run directory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.paper.simulate import ScheduleResult, simulate
from harness.paper.step_cost import StepCost
from harness.systems import SystemName
from harness.workload import RequestPlan, WorkloadSpec, build_plan


@dataclass(frozen=True)
class MachineCost:
    """What a run costs on one machine and its servers: engine steps and a fixed overhead."""

    step_cost: StepCost
    batch_size: int
    run_overhead_s: float
    # Idle engine time between naive waves: the client receives a whole wave before it
    # sends the next (harness.paper.simulate).
    wave_gap_s: float = 0.0
    # A system served by another server (static's) has that server's fitted steps.
    system_step_costs: Mapping[str, StepCost] = field(default_factory=dict)

    def cost_for(self, system: str) -> StepCost:
        """The step cost `system`'s runs are simulated with."""
        return self.system_step_costs.get(system, self.step_cost)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be at least 1, got {self.batch_size}")
        for name in ("run_overhead_s", "wave_gap_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be zero or positive seconds, got {value!r}")


@dataclass(frozen=True)
class PlannedRun:
    """One run of a job, in the order the sweep makes it, with its estimated duration."""

    system: SystemName
    workload: str
    repetition: int
    # None: the workload is sized by duration, not by request count.
    num_requests: int | None
    # The engine's makespan, simulated; `seconds` adds the run's fixed overhead.
    makespan_s: float
    seconds: float


@dataclass(frozen=True)
class JobPlan:
    """Every run of a job in order, and the time spent before the first and after the last."""

    runs: tuple[PlannedRun, ...]
    # Before: starting and warming the servers; after: analysis and the report.
    before_s: float = 0.0
    after_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The whole job's estimated seconds."""
        return self.before_s + sum(run.seconds for run in self.runs) + self.after_s


def simulate_run(plan: RequestPlan, system: SystemName, machine: MachineCost) -> ScheduleResult | None:
    """The schedule `system` runs `plan` with on this machine; None for a plan with a fixed duration.

    A closed loop of U users sized by request count never has more than U requests in
    the engine, and a finished request's user sends its next at once: it runs like a
    burst into min(B, U) rows.
    """
    if plan.duration_s is not None:
        return None
    outputs = np.array([request.output_tokens for request in plan.requests], dtype=np.int64)
    prompts = np.array([request.prompt_tokens for request in plan.requests], dtype=np.int64)
    if plan.arrival == "closed":
        assert plan.users is not None, "a closed loop names its users"
        rows, arrivals = min(machine.batch_size, plan.users), np.zeros(len(outputs))
    else:
        rows = machine.batch_size
        arrivals = np.array([request.arrival_s for request in plan.requests], dtype=float)
    return simulate(system, outputs, rows, machine.cost_for(system), prompt_tokens=prompts, arrivals=arrivals,
                    wave_gap_s=machine.wave_gap_s)


def makespan_s(plan: RequestPlan, system: SystemName, machine: MachineCost) -> float:
    """The engine's makespan of `system` on `plan`: simulated, or the plan's own fixed duration."""
    schedule = simulate_run(plan, system, machine)
    if schedule is None:
        assert plan.duration_s is not None, "only a plan with a fixed duration has no schedule"
        return plan.duration_s
    return schedule.makespan_s


def plan_job(
    specs: Sequence[WorkloadSpec],
    systems: Sequence[SystemName],
    repetitions: int,
    machine: MachineCost,
    before_s: float = 0.0,
    after_s: float = 0.0,
    stand_ins: Mapping[SystemName, SystemName] | None = None,
) -> JobPlan:
    """Every run of a sweep, in its order, with estimated durations.

    The order is `reproduce`'s: each repetition runs every workload on every system back
    to back. A (workload, system) pair is simulated once; its repetitions share the estimate.
    `stand_ins`: a system the step model cannot price (no engine step log) is priced as
    the system it maps to; the ETA then rescales it by its own first runs (harness.budget.eta).
    """
    if repetitions < 1:
        raise ValueError(f"repetitions: must be at least 1, got {repetitions}")
    estimates = {}
    for spec in specs:
        plan = build_plan(spec)
        for system in systems:
            estimates[spec.name, system] = makespan_s(plan, (stand_ins or {}).get(system, system), machine)
    runs = tuple(
        PlannedRun(system, spec.name, rep, spec.num_requests, estimates[spec.name, system],
                   estimates[spec.name, system] + machine.run_overhead_s)
        for rep in range(1, repetitions + 1) for spec in specs for system in systems
    )
    return JobPlan(runs, before_s, after_s)
