"""What sets the size of continuous batching's gain: two runs' makespans split by one step cost.

Each run's makespan is split into what the linear step cost (step_cost.LinearStepCost)
charges for its own busy engine steps, plus the time the engine sat idle:

- base: every busy step priced as a step of one of its sequences (overhead, one
  sequence, that sequence's share of the context), prefill left out. The ratio of two
  runs' base + idle is the schedule alone: how many steps, and how much idle time,
  each system needed for the same requests, i.e. its idle and padded slots.
- growth: what the step's other sequences add (per sequence, and their context).
- prefill: the prompt tokens the step computed.
- idle: makespan minus the measured busy time (a burst's ramp-in, naive turnarounds).

Adding growth, then prefill, to both runs takes the ratio from the schedule alone
to the modelled ratio; each factor (<= 1 when it narrows the gap) says how much that
cost dilutes the gain. One price list serves both runs, so the split compares
schedules, not machine speeds. Pure: steps tables in, seconds out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.step_cost_fit import busy_steps
from harness.paper.step_cost import LinearStepCost


@dataclass(frozen=True)
class TimeSplit:
    """One run's makespan in seconds, split by what the step cost charges."""

    busy_steps: int
    base_s: float
    growth_s: float
    prefill_s: float
    idle_s: float

    @property
    def busy_s(self) -> float:
        """Modelled busy time: every charge but idle."""
        return self.base_s + self.growth_s + self.prefill_s

    @property
    def prefill_share(self) -> float:
        """The share of modelled busy time spent prefilling prompts."""
        return self.prefill_s / self.busy_s if self.busy_s > 0 else float("nan")


def split_time(steps: pd.DataFrame, makespan_s: float, cost: LinearStepCost) -> TimeSplit:
    """`cost`'s charges for the busy steps of one run's steps table, and the idle rest of `makespan_s`."""
    sample = busy_steps(steps)
    running = np.maximum(sample.running, 1.0)
    context_per_sequence = sample.context_tokens / running
    base = cost.overhead_s + cost.per_sequence_s + cost.per_context_token_s * context_per_sequence
    growth = (running - 1.0) * (cost.per_sequence_s + cost.per_context_token_s * context_per_sequence)
    prefill = cost.per_prefill_token_s * sample.prefill_tokens + cost.per_prefill_pair_s * np.nan_to_num(
        sample.prefill_pairs)
    return TimeSplit(
        busy_steps=len(sample),
        base_s=float(base.sum()),
        growth_s=float(growth.sum()),
        prefill_s=float(prefill.sum()),
        idle_s=max(makespan_s - float(sample.seconds.sum()), 0.0),
    )


@dataclass(frozen=True)
class GapCauses:
    """Continuous against another system at one level: the ratio built up cost by cost.

    `schedule_ratio` prices both schedules' steps as steps of one sequence without
    prefill; `with_growth_ratio` adds the cost of the other sequences in each step;
    `modelled_ratio` adds prefill too. `measured_ratio` is the runs' own ratio of
    total tok/s, for comparison with the modelled ratio.
    """

    other: str
    measured_ratio: float
    continuous: TimeSplit
    against: TimeSplit

    @property
    def schedule_ratio(self) -> float:
        """The other system's time over continuous's with each step priced flat and prefill free."""
        return _ratio(self.against.base_s + self.against.idle_s, self.continuous.base_s + self.continuous.idle_s)

    @property
    def with_growth_ratio(self) -> float:
        """The ratio once each step also pays for its other sequences (still no prefill)."""
        return _ratio(self.against.base_s + self.against.growth_s + self.against.idle_s,
                      self.continuous.base_s + self.continuous.growth_s + self.continuous.idle_s)

    @property
    def modelled_ratio(self) -> float:
        """The ratio with every charge: growth and prefill included."""
        return _ratio(self.against.busy_s + self.against.idle_s, self.continuous.busy_s + self.continuous.idle_s)

    @property
    def growth_factor(self) -> float:
        """How much the cost of a step's other sequences scales the schedule's ratio (< 1 narrows it)."""
        return _ratio(self.with_growth_ratio, self.schedule_ratio)

    @property
    def prefill_factor(self) -> float:
        """How much prefill, the same work in both systems, scales the ratio (< 1 narrows it)."""
        return _ratio(self.modelled_ratio, self.with_growth_ratio)


def gap_causes(
    other: str,
    measured_ratio: float,
    continuous: tuple[pd.DataFrame, float],
    against: tuple[pd.DataFrame, float],
    cost: LinearStepCost,
) -> GapCauses:
    """Split continuous's and the other system's (steps, makespan) by `cost`."""
    return GapCauses(other, measured_ratio, split_time(*continuous, cost), split_time(*against, cost))


def mean_context_per_sequence(tables: Sequence[pd.DataFrame]) -> float:
    """Tokens each running sequence attends to, averaged over the busy steps of every run's steps table."""
    samples = [busy_steps(table) for table in tables if not table.empty]
    running = sum(float(np.maximum(sample.running, 1.0).sum()) for sample in samples if len(sample))
    context = sum(float(sample.context_tokens.sum()) for sample in samples if len(sample))
    return context / running if running > 0 else float("nan")


def _ratio(top: float, bottom: float) -> float:
    return top / bottom if bottom > 0 else float("nan")
