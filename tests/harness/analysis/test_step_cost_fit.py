"""The step-cost fit: known coefficients recovered, idle gaps left out, real steps predicted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.engine import engine_metrics
from harness.analysis.step_cost_fit import (
    StepCostFitError,
    StepSample,
    busy_steps,
    fit_step_cost,
    idle_gaps,
    mean_idle_gap,
)
from harness.paper.simulate import simulate
from harness.paper.step_cost import LinearStepCost

FIXTURES = Path(__file__).parent / "fixtures" / "engine_steps"
TRUE = LinearStepCost(overhead_s=0.003, per_sequence_s=0.0002, per_prefill_token_s=5e-5, per_context_token_s=4e-7)


def steps_table(running, prefill, context, cycle_s, finished=None, waiting=None, gap_s=0.0002):
    """A steps table whose step i starts cycle_s[i-1] after step i-1 (forward pass = cycle - gap)."""
    n = len(running)
    starts = np.concatenate([[1000.0], 1000.0 + np.cumsum(cycle_s)[:-1]])
    return pd.DataFrame({
        "t_s": starts,
        "end_s": starts + np.asarray(cycle_s) - gap_s,
        "running": running,
        "waiting": waiting if waiting is not None else np.full(n, 5),
        "prefill_tokens": prefill,
        "decode_tokens": running,
        "context_tokens": context,
        "generated_tokens": running,
        "admitted": [[] for _ in range(n)],
        "finished": finished if finished is not None else [[] for _ in range(n)],
    })


def synthetic(cost, n=4000, noise_s=0.0, seed=0):
    rng = np.random.default_rng(seed)
    running = rng.integers(1, 17, n)
    prefill = np.where(rng.random(n) < 0.05, rng.integers(1, 17, n) * 64, 0)
    context = running * rng.integers(64, 1600, n)
    cycle = (cost.overhead_s + cost.per_sequence_s * running + cost.per_prefill_token_s * prefill
             + cost.per_context_token_s * context + rng.normal(0, noise_s, n))
    return steps_table(running, prefill, context, cycle)


def test_fit_recovers_known_coefficients_exactly_without_noise():
    fit = fit_step_cost(busy_steps(synthetic(TRUE)))
    for name, value in TRUE.coefficients().items():
        assert fit.cost.coefficients()[name] == pytest.approx(value, rel=1e-6)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.residual_std_s == pytest.approx(0.0, abs=1e-9)


def test_fit_recovers_coefficients_through_noise_and_reports_it():
    sample = busy_steps(synthetic(TRUE, n=20000, noise_s=0.0005, seed=1))
    fit = fit_step_cost(sample)
    assert fit.cost.overhead_s == pytest.approx(TRUE.overhead_s, rel=0.05)
    assert fit.cost.per_sequence_s == pytest.approx(TRUE.per_sequence_s, rel=0.05)
    assert fit.cost.per_prefill_token_s == pytest.approx(TRUE.per_prefill_token_s, rel=0.05)
    assert fit.cost.per_context_token_s == pytest.approx(TRUE.per_context_token_s, rel=0.05)
    assert fit.residual_std_s == pytest.approx(0.0005, rel=0.05)
    # R² is the share of the variance the fit explains: all but the noise's.
    assert fit.r_squared == pytest.approx(1 - 0.0005**2 / sample.seconds.var(), abs=1e-3)
    assert abs(fit.relative_sum_error) < 1e-9  # least squares with an intercept: sums match


def test_fit_keeps_coefficients_non_negative():
    # Steps that get cheaper with context: a free fit would give a negative slope.
    n = 200
    context = np.linspace(100, 5000, n)
    table = steps_table(np.full(n, 4), np.zeros(n), context.astype(int), 0.006 - 2e-7 * context)
    fit = fit_step_cost(busy_steps(table))
    assert fit.cost.per_context_token_s == 0.0
    assert all(value >= 0 for value in fit.cost.coefficients().values())


def test_cycles_run_start_to_start_and_skip_idle_gaps_and_the_last_step():
    # Step 1 finishes the only running request with nothing waiting: the 50 ms before
    # step 2 are the engine waiting for the client, not step cost.
    table = steps_table([1, 1, 2, 2], [64, 0, 128, 0], [64, 65, 130, 132], [0.004, 0.054, 0.005, 0.005],
                        finished=[[], [7], [], [8, 9]], waiting=[0, 0, 0, 0], gap_s=0.0502)
    sample = busy_steps(table)
    np.testing.assert_allclose(sample.seconds, [0.004, 0.005])
    np.testing.assert_array_equal(sample.running, [1, 2])
    np.testing.assert_array_equal(sample.prefill_tokens, [64, 128])
    np.testing.assert_allclose(idle_gaps(table), [0.0502])
    assert mean_idle_gap([table, table]) == pytest.approx(0.0502)
    assert mean_idle_gap([]) == 0.0


def test_a_step_that_ends_every_running_request_waits_on_admission_not_compute():
    # Static mode: step 1 ends the batch while requests wait; the 400 ms to step 2 are the batch
    # forming (its batch wait), not step 1's cost. Its cycle is an idle gap, whatever is waiting.
    table = steps_table([2, 2, 2, 2], [0, 0, 128, 0], [64, 66, 130, 132], [0.004, 0.404, 0.005, 0.005],
                        finished=[[], [7, 8], [], [9, 10]], waiting=[3, 3, 1, 1], gap_s=0.4)
    np.testing.assert_allclose(busy_steps(table).seconds, [0.004, 0.005])
    np.testing.assert_allclose(idle_gaps(table), [0.4])


def test_prompt_attention_pairs_are_fitted_where_the_steps_recorded_them():
    cost = LinearStepCost(0.003, 0.0002, 5e-5, 4e-7, per_prefill_pair_s=3e-8)
    rng = np.random.default_rng(3)
    table = synthetic(cost, n=3000)
    prompts = np.where(table["prefill_tokens"] > 0, rng.integers(64, 3000, len(table)), 0)
    pairs = prompts * (prompts + 1) / 2
    table = table.assign(prefill_tokens=prompts, prefill_pairs=pairs,
                         t_s=1000.0 + np.concatenate([[0.0], np.cumsum(
                             cost.overhead_s + cost.per_sequence_s * table["running"] + 5e-5 * prompts
                             + 4e-7 * table["context_tokens"] + 3e-8 * pairs)[:-1]]))
    fit = fit_step_cost(busy_steps(table))
    assert fit.cost.per_prefill_pair_s == pytest.approx(3e-8, rel=1e-6) and fit.r_squared == pytest.approx(1.0)
    # Steps recorded before their pairs: fitted without the term, which a linear prefill cost then absorbs.
    older = fit_step_cost(busy_steps(table.drop(columns="prefill_pairs")))
    assert older.cost.per_prefill_pair_s == 0.0 and older.r_squared < 0.999


def test_the_simulator_prices_a_prompts_attention_with_its_square():
    cost = LinearStepCost(0.001, 0.0, 0.0, 0.0, per_prefill_pair_s=1e-8)
    short, long = (simulate("continuous", [1], 1, cost, prompt_tokens=[p]) for p in (1000, 4000))
    # One step each: the admission step, 1e-8 x p(p+1)/2 beyond the overhead.
    assert short.makespan_s == pytest.approx(0.001 + 1e-8 * 1000 * 1001 / 2)
    assert long.makespan_s == pytest.approx(0.001 + 1e-8 * 4000 * 4001 / 2)


def test_cycles_are_taken_in_time_order():
    table = steps_table([1, 2, 3], [0, 0, 0], [10, 20, 30], [0.002, 0.003, 0.004])
    sample = busy_steps(table.iloc[::-1])
    np.testing.assert_allclose(sample.seconds, [0.002, 0.003])


def test_fit_refuses_too_few_steps():
    with pytest.raises(StepCostFitError, match="busy steps"):
        fit_step_cost(StepSample.concat([busy_steps(synthetic(TRUE, n=3))]))


def test_fit_refuses_steps_that_leave_decoding_free():
    # Step times that only the context explains: the fit puts nothing on overhead or sequences.
    sample = StepSample(
        running=np.full(6, 4), prefill_tokens=np.zeros(6), context_tokens=np.arange(10, 70, 10),
        prefill_pairs=np.zeros(6), seconds=np.arange(0.001, 0.0065, 0.001),
    )
    with pytest.raises(StepCostFitError, match="both zero"):
        fit_step_cost(sample)


def test_real_engine_steps_fitted_at_small_batches_predict_batch_16():
    # Fitted on closed loops of 1, 2, 4 and 8 sequences only, the fit extrapolates to
    # 16 sequences side by side (2 x 16 requests of 64 + 128 tokens) on the same server.
    tables = [pd.read_parquet(FIXTURES / f"calibrate-b{b}-r1.parquet") for b in (1, 2, 4, 8)]
    fit = fit_step_cost(StepSample.concat([busy_steps(table) for table in tables]))
    assert fit.r_squared > 0.8
    assert fit.cost.per_sequence_s > 0 and fit.cost.per_prefill_token_s > 0
    predicted = simulate("continuous", [128] * 32, 16, fit.cost, prompt_tokens=[64] * 32)
    measured = engine_metrics(pd.read_parquet(FIXTURES / "calibrate-b16-r1.parquet"), 16)
    assert predicted.num_steps == 256 and measured.steps == 267  # the closed loop admits in a few steps
    assert predicted.makespan_s == pytest.approx(measured.makespan_s, rel=0.10)


@pytest.mark.parametrize(
    ("coefficients", "argument"),
    [
        ((0.001, -1e-6, 0.0, 0.0), "per_sequence_s"),
        ((0.001, 0.0, float("nan"), 0.0), "per_prefill_token_s"),
        ((0.0, 0.0, 1e-5, 1e-7), "step cost"),
    ],
)
def test_linear_cost_refuses_negative_or_free_steps(coefficients, argument):
    with pytest.raises(ValueError, match=argument):
        LinearStepCost(*coefficients)
