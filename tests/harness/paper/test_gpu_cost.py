"""The GPU step cost: each term worked out by hand from the cards."""

from __future__ import annotations

import numpy as np
import pytest

from harness.paper.gpu_cost import GpuStepCost, StepWork
from harness.paper.physics import A100_40GB, H100_SXM_80GB, LLAMA_3_1_8B, OPT_13B

OPT = GpuStepCost(OPT_13B, A100_40GB, efficiency=0.5, overhead_s=0.01)


def test_flops_per_token_leave_out_lookup_tables_and_count_a_tied_head_once():
    # OPT-13B: 12,853,473,280 parameters - token embedding 257,392,640 - positions 10,496,000 (the
    # tied LM head is the token embedding, already counted once) = 12,585,584,640 multiplied per token.
    assert OPT.layer_flops_per_token == 2 * 12_585_584_640
    assert OPT.lm_head_flops_per_sequence == 2 * 50272 * 5120
    # Llama-3.1-8B: 8,030,261,248 - embedding and untied head 2 x 525,336,576 = 6,979,588,096.
    llama = GpuStepCost(LLAMA_3_1_8B, H100_SXM_80GB, efficiency=0.5)
    assert llama.layer_flops_per_token == 2 * 6_979_588_096
    # Attention: 4 x 40 layers x 40 heads x 128 = 819,200 FLOPs per (query, key) pair.
    assert OPT.attention_flops_per_pair == 819_200


def test_a_small_decode_step_is_memory_bound_at_the_weight_floor_plus_kv_reads():
    # One sequence, 1000 tokens of context: (25,706,946,560 + 1000 x 819,200) / 1.555e12 s.
    terms = OPT.terms(StepWork(decode_sequences=1, decode_context_tokens=1000, prefill_sequences=0,
                               prefill_tokens=0, prefill_attention_pairs=0))
    assert terms.memory_s == pytest.approx((25_706_946_560 + 819_200_000) / 1.555e12)
    assert not terms.compute_bound
    assert terms.seconds == pytest.approx(terms.memory_s + 0.01)


def test_a_prefill_step_is_compute_bound_at_peak_times_efficiency():
    # 16 prompts of 512: 8192 tokens through the layers, 16 LM-head rows, 16 x 512 x 513 / 2 pairs.
    work = StepWork(0, 0, 16, 8192, 16 * 512 * 513 // 2)
    flops = 2 * 12_585_584_640 * 8192 + 2 * 50272 * 5120 * 16 + 819_200 * 16 * 512 * 513 // 2
    terms = OPT.terms(work)
    assert terms.compute_s == pytest.approx(flops / (312e12 * 0.5))
    assert terms.compute_bound
    assert OPT.seconds(work) == pytest.approx(terms.compute_s + 0.01)


def test_scales_move_only_their_own_term():
    work = StepWork(4, 4000, 0, 0, 0)
    faster_memory = GpuStepCost(OPT_13B, A100_40GB, 0.5, bandwidth_scale=2.0)
    assert faster_memory.terms(work).memory_s == pytest.approx(OPT.terms(work).memory_s / 2)
    assert faster_memory.terms(work).compute_s == pytest.approx(OPT.terms(work).compute_s)
    faster_compute = GpuStepCost(OPT_13B, A100_40GB, 0.5, flops_scale=2.0)
    assert faster_compute.terms(work).compute_s == pytest.approx(OPT.terms(work).compute_s / 2)


def test_simulate_interface_prices_decode_runs_and_wave_prefills_like_step_work():
    contexts = np.array([600, 604, 608])
    runs = OPT.step_seconds(4, contexts, 0)
    assert runs == pytest.approx([OPT.seconds(StepWork(4, int(c), 0, 0, 0)) for c in contexts])
    # A prefill step is a wave's admission: 4 rows of 512 each.
    wave = OPT.step_seconds(4, np.array([2048]), 2048)
    assert wave == pytest.approx([OPT.seconds(StepWork(0, 0, 4, 2048, 4 * 512 * 513 // 2))])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"efficiency": 0.0}, "efficiency"),
        ({"efficiency": 1.5}, "efficiency"),
        ({"efficiency": 0.5, "overhead_s": -1.0}, "overhead_s"),
        ({"efficiency": 0.5, "bandwidth_scale": 0.0}, "bandwidth_scale"),
        ({"efficiency": 0.5, "flops_scale": float("nan")}, "flops_scale"),
    ],
)
def test_bad_constants_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GpuStepCost(OPT_13B, A100_40GB, **kwargs)


@pytest.mark.parametrize(
    "args", [(0, 0, 0, 0, 0), (1, -1, 0, 0, 0), (1, 10, 1, 0, 0), (1, 10, 0, 5, 0), (True, 1, 0, 0, 0)]
)
def test_bad_step_work_is_refused(args):
    with pytest.raises(ValueError):
        StepWork(*args)
