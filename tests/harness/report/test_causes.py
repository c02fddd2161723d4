"""The report's causes follow the run's figures: a different fit names a different cause."""

from __future__ import annotations

import pytest

from harness.analysis.gap_causes import GapCauses, TimeSplit
from harness.paper.step_cost import LinearStepCost
from harness.report.causes import GROWTH, PREFILL, SCHEDULE, cause_sentences, cause_table, keeps_small
from harness.report.document import to_markdown
from harness.report.facts import LevelCauses
from harness.report.step_cost_summary import StepCostSummary

PROMPT_TOKENS = 16 * 512


def charged(cost: LinearStepCost, steps: dict[int, int]) -> TimeSplit:
    """What `cost` charges a run of `steps[n]` busy steps of n sequences, prefilling 16 prompts, never idle."""
    return TimeSplit(
        busy_steps=sum(steps.values()),
        base_s=sum(count * (cost.overhead_s + cost.per_sequence_s) for count in steps.values()),
        growth_s=sum(count * (n - 1) * cost.per_sequence_s for n, count in steps.items()),
        prefill_s=PROMPT_TOKENS * cost.per_prefill_token_s,
        idle_s=0.0,
    )

# Three fits of one machine: a decode step of 16 sequences costs 1.05x one of 1, or 1.85x;
# or prefill is dear.
FLAT = LinearStepCost(overhead_s=0.010, per_sequence_s=0.0000333, per_prefill_token_s=1e-6, per_context_token_s=0.0)
STEEP = LinearStepCost(overhead_s=0.005, per_sequence_s=0.0003, per_prefill_token_s=1e-6, per_context_token_s=0.0)
DEAR_PREFILL = LinearStepCost(overhead_s=0.010, per_sequence_s=0.0000333, per_prefill_token_s=50e-6,
                              per_context_token_s=0.0)


def level_causes(cost: LinearStepCost) -> LevelCauses:
    """Continuous keeps 16 rows full for 10 steps; static needs 20 more steps 4 rows wide for the tail."""
    causes = GapCauses("static", 1.6, continuous=charged(cost, {16: 10}), against=charged(cost, {16: 10, 4: 20}))
    return LevelCauses(1536, 16, (causes,))


def batch_growth(cost: LinearStepCost) -> float:
    summary = StepCostSummary(server="s", runs=1, steps=1, r_squared=1.0, residual_std_s=0.0, mean_step_s=0.01,
                               wave_gap_s=0.0, **cost.coefficients())
    return summary.decode_step_s(16) / summary.decode_step_s(1)


def test_the_fits_grow_as_named():
    assert batch_growth(FLAT) == pytest.approx(1.05, abs=0.01)
    assert batch_growth(STEEP) == pytest.approx(1.85, abs=0.01)


def test_a_flat_step_cost_leaves_the_schedule_as_the_cause():
    level = level_causes(FLAT)
    assert keeps_small(level.causes[0]) == SCHEDULE
    text = cause_sentences(level)
    assert "Neither cost takes a tenth off: continuous/static is as small as the schedule itself makes it, 3.00×" \
        in text
    assert GROWTH not in text


def test_a_steep_step_cost_is_named_with_its_factor():
    level = level_causes(STEEP)
    causes = level.causes[0]
    assert keeps_small(causes) == GROWTH
    text = cause_sentences(level)
    assert f"What keeps continuous/static small here: {GROWTH} (×{causes.growth_factor:.2f})." in text
    # The figures the sentence is built from: 30 busy steps against 10, the ratio the step cost rebuilds.
    assert "static took 30 busy engine steps and 0.0 s idle where continuous took 10 steps and 0.0 s" in text
    assert f"makes it {causes.modelled_ratio:.2f}×" in text


def test_dear_prefill_is_named_and_its_share_shown():
    level = level_causes(DEAR_PREFILL)
    causes = level.causes[0]
    assert keeps_small(causes) == PREFILL
    assert causes.continuous.prefill_share > 0.75
    assert f"prefill, {causes.continuous.prefill_share:.0%} of continuous's busy engine time" in cause_sentences(level)


def test_the_table_names_one_cause_per_row():
    rows = [level_causes(cost) for cost in (FLAT, STEEP, DEAR_PREFILL)]
    markdown = to_markdown([cause_table(rows)])
    named = [line.rsplit("|", 2)[1].strip() for line in markdown.splitlines()[2:]]
    assert named == [SCHEDULE, GROWTH, PREFILL]
