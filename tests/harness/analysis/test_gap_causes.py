"""The makespan split behind the report's causes: hand-built step logs, hand-computed charges."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.gap_causes import gap_causes, mean_context_per_sequence, split_time
from harness.paper.step_cost import LinearStepCost

CYCLE_S = 0.01
PROMPT_TOKENS = 16 * 512


def step_log(running: list[int], context_per_sequence: int = 0) -> pd.DataFrame:
    """Busy steps of `running` sequences, one CYCLE_S apart, the first prefilling every prompt.

    A last step finishes the run and leaves the engine idle, so it has no measured cycle.
    """
    rows = [
        {"t_s": i * CYCLE_S, "end_s": i * CYCLE_S + 0.008, "running": n, "waiting": 0,
         "prefill_tokens": PROMPT_TOKENS if i == 0 else 0, "context_tokens": n * context_per_sequence,
         "finished": []}
        for i, n in enumerate(running)
    ]
    end = len(running) * CYCLE_S
    rows.append({"t_s": end, "end_s": end + 0.008, "running": 1, "waiting": 0, "prefill_tokens": 0,
                 "context_tokens": 0, "finished": [0]})
    return pd.DataFrame(rows)


# Continuous keeps 16 rows full for 10 steps; static runs its long tail 4 rows wide.
CONTINUOUS = [16] * 10
STATIC = [16] * 10 + [4] * 20
COST = LinearStepCost(overhead_s=0.005, per_sequence_s=0.0003, per_prefill_token_s=1e-6, per_context_token_s=0.0)


def test_split_charges_each_step_by_the_model():
    split = split_time(step_log(STATIC), makespan_s=0.5, cost=COST)
    assert split.busy_steps == 30
    assert split.base_s == pytest.approx(30 * (0.005 + 0.0003))
    # The other sequences: 15 per full step, 3 per tail step.
    assert split.growth_s == pytest.approx((10 * 15 + 20 * 3) * 0.0003)
    assert split.prefill_s == pytest.approx(PROMPT_TOKENS * 1e-6)
    # 30 measured cycles of 10 ms: the rest of the makespan is idle.
    assert split.idle_s == pytest.approx(0.5 - 0.30)


def test_ratio_built_up_from_the_schedule_alone():
    causes = gap_causes("static", 2.1, (step_log(CONTINUOUS), 0.10), (step_log(STATIC), 0.30), COST)
    assert causes.schedule_ratio == pytest.approx(3.0)
    with_growth = (30 * 0.0053 + 210 * 0.0003) / (10 * 0.0053 + 150 * 0.0003)
    assert causes.with_growth_ratio == pytest.approx(with_growth)
    assert causes.growth_factor == pytest.approx(with_growth / 3.0)
    prefill = PROMPT_TOKENS * 1e-6
    modelled = (30 * 0.0053 + 210 * 0.0003 + prefill) / (10 * 0.0053 + 150 * 0.0003 + prefill)
    assert causes.modelled_ratio == pytest.approx(modelled)
    assert causes.prefill_factor == pytest.approx(modelled / with_growth)
    assert causes.continuous.prefill_share == pytest.approx(prefill / (10 * 0.0053 + 150 * 0.0003 + prefill))


def test_context_per_sequence_is_averaged_over_every_runs_busy_steps():
    # 240 sequence-steps at 600 tokens each and 160 at 300: (144,000 + 48,000) / 400.
    tables = [step_log(STATIC, context_per_sequence=600), step_log(CONTINUOUS, context_per_sequence=300)]
    assert mean_context_per_sequence(tables) == pytest.approx(480)
    assert math.isnan(mean_context_per_sequence([]))
