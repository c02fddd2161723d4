"""Why a ratio differs from another setup's: its plans, or the machine's step costs.

Two reproductions of the same workloads (here, and a reference made elsewhere) differ in
what each plan held (how many requests, which lengths) and in what a step cost on each
machine (its fitted step-cost model, one per server). Each ratio between two systems is
predicted three ways (harness.analysis.gap.predict_for_run):

- on these plans with these step costs (what this report predicts),
- on these plans with the reference's step costs (the step costs swapped),
- on the reference's plans with its step costs (what the reference predicts).

The first over the second is the step costs' share of the difference, the second over the
third the plans'; what the measured difference holds beyond both (the machines' noise,
anything no step-cost model prices) is left. Pure: plans and costs come in as data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.gap import predict_for_run
from harness.analysis.levels import Level
from harness.paper.step_cost import LinearStepCost
from harness.systems import SystemName


@dataclass(frozen=True)
class SystemCost:
    """What one system's runs cost per step on one machine: its server's step cost and wave gap."""

    step_cost: LinearStepCost
    wave_gap_s: float = 0.0


@dataclass(frozen=True)
class PlannedCell:
    """One system at one level as planned: its requests (plan.json's `requests`) and B."""

    requests: Sequence[Mapping[str, Any]]
    batch_size: int


@dataclass(frozen=True)
class RatioDifference:
    """A ratio here beside the reference's, and the share of the difference each cause accounts for.

    Shares are ratios of ratios (1.0: no effect): `measured` = step_costs x plans x left.
    """

    level: Level
    name: str
    here: float
    reference: float
    step_costs: float
    plans: float

    @property
    def measured(self) -> float:
        """Here over the reference."""
        return self.here / self.reference

    @property
    def left(self) -> float:
        """What neither the step costs nor the plans account for."""
        return self.measured / (self.step_costs * self.plans)

    @property
    def main_cause(self) -> str:
        """"step costs", "plans" or "neither": the larger of the two modelled effects, where it
        reaches half of the measured difference."""
        gap = abs(math.log(self.measured))
        effects = {"step costs": abs(math.log(self.step_costs)), "plans": abs(math.log(self.plans))}
        cause, size = max(effects.items(), key=lambda item: item[1])
        return cause if gap > 0 and size >= gap / 2 else "neither"


def system_cost(step_model: Mapping[str, Any]) -> SystemCost:
    """A SystemCost from a report's `step_models` entry (summary.json, harness.reference)."""
    return SystemCost(
        LinearStepCost(
            overhead_s=float(step_model["overhead_s"]),
            per_sequence_s=float(step_model["per_sequence_s"]),
            per_prefill_token_s=float(step_model["per_prefill_token_s"]),
            per_context_token_s=float(step_model["per_context_token_s"]),
            per_prefill_pair_s=float(step_model.get("per_prefill_pair_s") or 0.0),
        ),
        float(step_model.get("wave_gap_s") or 0.0),
    )


def predicted_ratio(top: PlannedCell, bottom: PlannedCell, top_system: SystemName, bottom_system: SystemName,
                    costs: Mapping[SystemName, SystemCost]) -> float:
    """top's predicted total tok/s over bottom's, each priced by its system's cost; nan if either cannot be."""
    figures = []
    for cell, system in ((top, top_system), (bottom, bottom_system)):
        cost = costs.get(system)
        prediction = None if cost is None else predict_for_run(
            cell.requests, cell.batch_size, system, cost.step_cost, wave_gap_s=cost.wave_gap_s)
        figures.append(math.nan if prediction is None else prediction.total_tok_s)
    return figures[0] / figures[1] if figures[1] > 0 else math.nan


def ratio_difference(level: Level, pair: tuple[SystemName, SystemName], here: float, reference: float,
                     plans_here: Mapping[SystemName, PlannedCell], plans_reference: Mapping[SystemName, PlannedCell],
                     costs_here: Mapping[SystemName, SystemCost], costs_reference: Mapping[SystemName, SystemCost],
                     ) -> RatioDifference | None:
    """The difference between `here` and `reference` (the ratio of `pair`'s two systems) split into its
    causes; None where a plan or a step cost of either system is missing."""
    top, bottom = pair
    if not all(system in plans for plans in (plans_here, plans_reference) for system in (top, bottom)):
        return None
    own = predicted_ratio(plans_here[top], plans_here[bottom], top, bottom, costs_here)
    swapped = predicted_ratio(plans_here[top], plans_here[bottom], top, bottom, costs_reference)
    theirs = predicted_ratio(plans_reference[top], plans_reference[bottom], top, bottom, costs_reference)
    if not all(math.isfinite(value) and value > 0 for value in (own, swapped, theirs, here, reference)):
        return None
    return RatioDifference(level, f"{top}/{bottom}", here, reference, own / swapped, swapped / theirs)
