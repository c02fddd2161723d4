"""Splitting a ratio's difference from a reference into step costs and plans, on plans priced by the simulator."""

from __future__ import annotations

import math

import pytest

from harness.analysis.step_cost_swap import (
    PlannedCell,
    SystemCost,
    predicted_ratio,
    ratio_difference,
    system_cost,
)
from harness.paper.step_cost import LinearStepCost


def plan(outputs, prompt=64):
    return PlannedCell([{"index": i, "prompt_tokens": prompt, "output_tokens": out, "arrival_s": 0.0}
                        for i, out in enumerate(outputs)], batch_size=4)


SPREAD = plan([8, 16, 24, 80] * 6)
WIDER = plan([4, 8, 16, 120] * 6)
# A step that carries more sequences costs more here than on the reference's host: batching is dearer.
HERE = LinearStepCost(overhead_s=0.002, per_sequence_s=0.002, per_prefill_token_s=1e-5, per_context_token_s=1e-8)
THERE = LinearStepCost(overhead_s=0.004, per_sequence_s=0.0002, per_prefill_token_s=1e-5, per_context_token_s=1e-8)


def costs(cost):
    return {"continuous": SystemCost(cost), "static": SystemCost(cost)}


def plans(cell):
    return {"continuous": cell, "static": cell}


def test_the_step_costs_are_named_when_only_they_differ():
    # What each host's costs predict stands in for what each measured: the whole difference is the step costs'.
    here = predicted_ratio(SPREAD, SPREAD, "continuous", "static", costs(HERE))
    there = predicted_ratio(SPREAD, SPREAD, "continuous", "static", costs(THERE))
    difference = ratio_difference(1536, ("continuous", "static"), here, there, plans(SPREAD), plans(SPREAD),
                                  costs(HERE), costs(THERE))
    assert difference is not None
    assert here < there  # dearer batching here shrinks the gain
    assert difference.plans == pytest.approx(1.0)
    assert difference.step_costs == pytest.approx(here / there)
    assert difference.left == pytest.approx(1.0)
    assert difference.main_cause == "step costs"


def test_the_plans_are_named_when_only_they_differ():
    here = predicted_ratio(SPREAD, SPREAD, "continuous", "static", costs(THERE))
    there = predicted_ratio(WIDER, WIDER, "continuous", "static", costs(THERE))
    difference = ratio_difference(1536, ("continuous", "static"), here, there, plans(SPREAD), plans(WIDER),
                                  costs(THERE), costs(THERE))
    assert difference is not None
    assert difference.step_costs == pytest.approx(1.0)
    assert difference.main_cause == "plans"


def test_a_difference_neither_model_prices_is_left():
    difference = ratio_difference(32, ("continuous", "static"), 1.30, 1.10, plans(SPREAD), plans(SPREAD),
                                  costs(THERE), costs(THERE))
    assert difference is not None
    assert difference.step_costs == pytest.approx(1.0) and difference.plans == pytest.approx(1.0)
    assert difference.left == pytest.approx(1.30 / 1.10)
    assert difference.main_cause == "neither"


def test_a_missing_system_gives_no_split():
    assert ratio_difference(32, ("continuous", "naive"), 1.3, 1.1, plans(SPREAD), plans(SPREAD),
                            costs(THERE), costs(THERE)) is None


def test_a_reports_step_model_entry_becomes_a_system_cost():
    entry = {"overhead_s": 0.003, "per_sequence_s": 1e-4, "per_prefill_token_s": 4e-5,
             "per_context_token_s": 2.6e-7, "wave_gap_s": 0.025}
    cost = system_cost(entry)  # written before the pair term: it prices none
    assert cost.step_cost.per_prefill_pair_s == 0.0 and cost.wave_gap_s == 0.025
    assert math.isclose(cost.step_cost.overhead_s, 0.003)
