"""The GPU engine schedule: admission by blocks and budget, mixed steps, preemption, static gates."""

from __future__ import annotations

import numpy as np
import pytest

from harness.paper.gpu_cost import GpuStepCost
from harness.paper.gpu_schedule import EngineLimits, simulate_engine
from harness.paper.physics import A100_40GB, OPT_13B

COST = GpuStepCost(OPT_13B, A100_40GB, efficiency=0.5, overhead_s=0.01)
ROOMY = EngineLimits(kv_blocks=10_000, max_num_seqs=256, max_num_batched_tokens=100_000)


def test_unbounded_engine_prefills_everyone_in_one_step_then_decodes():
    schedule = simulate_engine("continuous", [16] * 4, [3] * 4, ROOMY, COST)
    assert schedule.num_steps == 3
    assert schedule.step_prefill_tokens.tolist() == [64, 0, 0]
    assert schedule.step_sequences.tolist() == [4, 4, 4]
    assert schedule.makespan_s == pytest.approx(schedule.step_duration_s.sum())
    assert schedule.total_tokens_per_s == pytest.approx((64 + 12) / schedule.makespan_s)


def test_token_budget_limits_the_prompts_admitted_per_step_and_decodes_count_against_it():
    limits = EngineLimits(kv_blocks=10_000, max_num_seqs=256, max_num_batched_tokens=250)
    schedule = simulate_engine("continuous", [100] * 4, [5] * 4, limits, COST)
    # Step 1: two prompts (200; a third would make 300). Step 2: 2 decodes + 2 prompts = 202.
    assert schedule.step_prefill_tokens.tolist()[:3] == [200, 200, 0]
    # Prefill and decode share step 2: four sequences, two of them new.
    assert schedule.step_sequences.tolist()[:2] == [2, 4]


def test_admission_waits_for_free_blocks_above_the_watermark():
    # 32-token prompts take 2 blocks of 16; 5 blocks hold two of them, not a third.
    limits = EngineLimits(kv_blocks=5, max_num_seqs=256, max_num_batched_tokens=10_000, watermark=0.0)
    schedule = simulate_engine("continuous", [32] * 3, [1] * 3, limits, COST)
    assert schedule.step_prefill_tokens.tolist() == [64, 32]
    with_watermark = EngineLimits(kv_blocks=100, max_num_seqs=256, max_num_batched_tokens=10_000, watermark=0.5)
    # 50 blocks must stay free: 25 prompts of 2 blocks fit, the 26th waits.
    assert simulate_engine("continuous", [32] * 30, [1] * 30, with_watermark, COST).step_prefill_tokens[0] == 25 * 32


def test_a_full_cache_preempts_by_recompute_and_every_token_still_comes_out():
    # Two sequences of 32 fill 4 of 5 blocks; their 33rd tokens need a block each: one is preempted,
    # re-prefilled later over its prompt and the token it had, and both finish.
    limits = EngineLimits(kv_blocks=5, max_num_seqs=256, max_num_batched_tokens=10_000, watermark=0.0)
    schedule = simulate_engine("continuous", [32, 32], [4, 4], limits, COST)
    assert schedule.preemptions >= 1
    assert schedule.recomputed_tokens >= 33
    assert schedule.output_tokens == 8
    assert (schedule.step_prefill_tokens > 32).any()  # a recompute prefill covers prompt + generated


def test_static_waits_for_the_whole_batch_while_continuous_refills():
    limits = EngineLimits(kv_blocks=10_000, max_num_seqs=2, max_num_batched_tokens=10_000)
    outputs = [1, 5, 1, 5]
    static = simulate_engine("static", [8] * 4, outputs, limits, COST)
    continuous = simulate_engine("continuous", [8] * 4, outputs, limits, COST)
    # Static: batch {0, 1} runs 5 steps, then {2, 3} another 5.
    assert static.num_steps == 10
    assert static.step_prefill_tokens.tolist() == [16, 0, 0, 0, 0, 16, 0, 0, 0, 0]
    # Continuous: request 2 takes request 0's row at step 2, request 3 takes its row at step 3.
    assert continuous.num_steps == 7
    assert continuous.total_tokens_per_s > static.total_tokens_per_s


def test_requests_that_could_never_be_admitted_are_refused():
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        simulate_engine("continuous", [600], [10], EngineLimits(10_000, 8, 512), COST)
    with pytest.raises(ValueError, match="kv cache"):
        simulate_engine("continuous", [100], [10], EngineLimits(4, 8, 10_000), COST)
    with pytest.raises(ValueError, match="system"):
        simulate_engine("naive", [1], [1], ROOMY, COST)
    with pytest.raises(ValueError, match="entries"):
        simulate_engine("continuous", [1, 2], [1], ROOMY, COST)
    with pytest.raises(TypeError):
        simulate_engine("continuous", np.array([1.5]), [1], ROOMY, COST)


@pytest.mark.parametrize(
    "kwargs", [{"kv_blocks": 0}, {"max_num_seqs": -1}, {"max_num_batched_tokens": 1.5}, {"watermark": 1.0}]
)
def test_bad_limits_are_refused(kwargs):
    values = {"kv_blocks": 10, "max_num_seqs": 1, "max_num_batched_tokens": 10} | kwargs
    with pytest.raises(ValueError):
        EngineLimits(**values)


def test_requests_arriving_apart_each_run_alone_and_wait_for_nothing():
    schedule = simulate_engine("continuous", [16, 16], [3, 3], ROOMY, COST, arrivals=[0.0, 10.0])
    alone = simulate_engine("continuous", [16], [3], ROOMY, COST)
    assert schedule.admitted_s.tolist() == [0.0, 10.0]
    # The engine idled between the two: the second request's latencies are the first's.
    assert schedule.finish_s - schedule.arrival_s == pytest.approx([alone.makespan_s] * 2)
    assert schedule.first_token_s[1] - 10.0 == pytest.approx(alone.first_token_s[0])
    assert schedule.makespan_s == pytest.approx(10.0 + alone.makespan_s)


def test_a_request_arriving_mid_run_joins_continuous_at_the_next_step_and_waits_for_static():
    limits = EngineLimits(kv_blocks=10_000, max_num_seqs=2, max_num_batched_tokens=10_000)
    first = simulate_engine("continuous", [16], [50], limits, COST)
    late = float(first.step_duration_s[:10].sum()) - 1e-6  # just before step 10 ends
    continuous = simulate_engine("continuous", [16, 16], [50, 5], limits, COST, arrivals=[0.0, late])
    static = simulate_engine("static", [16, 16], [50, 5], limits, COST, arrivals=[0.0, late])
    # Continuous admits it into the step after its arrival; static only once the first batch has finished.
    assert continuous.admitted_s[1] == pytest.approx(first.step_duration_s[:10].sum())
    assert static.admitted_s[1] == pytest.approx(static.finish_s[0])
    assert static.finish_s[1] - late > 5 * (continuous.finish_s[1] - late)


def test_static_batch_wait_forms_a_batch_when_full_or_when_its_oldest_has_waited():
    limits = EngineLimits(kv_blocks=10_000, max_num_seqs=2, max_num_batched_tokens=10_000)
    impatient = simulate_engine("static", [8, 8], [3, 3], limits, COST, arrivals=[0.0, 0.5])
    full = simulate_engine("static", [8, 8], [3, 3], limits, COST, arrivals=[0.0, 0.5], static_batch_wait_s=1.0)
    timed_out = simulate_engine("static", [8, 8], [3, 3], limits, COST, arrivals=[0.0, 5.0], static_batch_wait_s=1.0)
    assert impatient.admitted_s[0] == 0.0  # impatient: the batch of one starts at once
    assert full.admitted_s.tolist() == [0.5, 0.5]  # the second arrival fills the batch
    assert timed_out.admitted_s[0] == pytest.approx(1.0)  # the first waited its 1 s, then went alone
    assert timed_out.admitted_s[1] == pytest.approx(6.0)  # and so did the second, arriving to an idle engine


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"arrivals": [0.0]}, "arrivals"),
    ({"arrivals": [0.0, -1.0]}, "arrivals"),
    ({"arrivals": [0.0, float("nan")]}, "arrivals"),
    ({"static_batch_wait_s": -1.0}, "static_batch_wait_s"),
])
def test_bad_arrivals_and_waits_are_refused(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        simulate_engine("static", [8, 8], [3, 3], ROOMY, COST, **kwargs)
