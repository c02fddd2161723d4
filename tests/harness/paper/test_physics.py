"""Re-derive the published decode figures for Llama-3.1-8B and OPT-13B."""

from __future__ import annotations

import pydantic
import pytest

from harness.paper.physics import (
    A100_40GB,
    A100_80GB,
    H100_SXM_80GB,
    LLAMA_3_1_8B,
    OPT_13B,
    GpuSpec,
    MemoryAllowance,
    ModelShape,
    kv_bytes_per_token,
    model_card,
    roofline_step_cost_s,
)


def test_llama_3_1_8b_parameter_count_from_its_shape():
    # Embedding and untied LM head: 2 x 128256 x 4096 = 1,050,673,152.
    # Per layer: q and o 2 x 4096 x 4096 + k and v 2 x 4096 x 1024 = 41,943,040;
    #   MLP 3 x 4096 x 14336 = 176,160,768; two RMSNorms 8,192 -> 218,112,000.
    # 32 layers = 6,979,584,000; final norm 4,096. Total 8,030,261,248 (the "8.03B").
    assert LLAMA_3_1_8B.num_parameters == 8_030_261_248


def test_opt_13b_parameter_count_from_its_shape():
    # Token embedding 50272 x 5120 = 257,392,640 (tied LM head);
    # positions (2048 + 2) x 5120 = 10,496,000.
    # Per layer: q, k, v, o 4 x (5120^2 + 5120) = 104,878,080;
    #   fc1 5120 x 20480 + 20480 and fc2 20480 x 5120 + 5120 = 209,740,800;
    #   two LayerNorms 4 x 5120 = 20,480 -> 314,639,360; 40 layers = 12,585,574,400.
    # Final LayerNorm 10,240. Total 12,853,473,280 (the "12.9B").
    assert OPT_13B.num_parameters == 12_853_473_280


def test_llama_on_h100_reproduces_the_published_figures():
    card = model_card(LLAMA_3_1_8B, H100_SXM_80GB)
    # ~16 GB of BF16 weights: 8.03e9 x 2 = 16.06e9 bytes.
    assert card.weight_bytes == 16_060_522_496
    assert card.weight_bytes == pytest.approx(16e9, rel=0.03)
    # Reading them once per step: 16.06e9 / 3.35e12 = 4.79 ms.
    assert card.decode_step_floor_s == pytest.approx(4.79e-3, rel=0.01)
    # Crossover: 989e12 x 16.06e9 / (3.35e12 x 2 x 8.03e9) = 989 / 3.35 = 295.2 sequences.
    assert card.crossover_batch == pytest.approx(295.2, rel=0.01)
    # KV per token: 2 x 32 layers x 8 heads x 128 x 2 bytes = 131072 bytes = 128 KiB exactly.
    assert card.kv_bytes_per_token == 131072
    # Cache room: 80 GB x 0.9 = 72 GB, - 16.06 weights - 2.5 activations - 0.5 non-torch = 52.94 GB.
    assert card.kv_cache_bytes_available == pytest.approx(52.94e9, rel=1e-3)
    assert abs(card.kv_cache_bytes_available - 53e9) <= 2e9
    # 52.94e9 / 131072 = 403,896 tokens.
    assert card.kv_tokens_capacity == 403_896


def test_opt_13b_weights_and_kv_per_token():
    card = model_card(OPT_13B, A100_80GB)
    # 12.85e9 x 2 bytes = 25.7e9: the "~26 GB" of FP16 weights.
    assert card.weight_bytes == pytest.approx(26e9, rel=0.02)
    # 2 x 40 layers x 40 heads x 128 (= 5120 / 40, the default head_dim) x 2 bytes = 800 KiB.
    assert OPT_13B.head_dim == 128
    assert card.kv_bytes_per_token == 819_200 == 800 * 1024
    # 25.71e9 / 2.039e12 = 12.6 ms per step.
    assert card.decode_step_floor_s == pytest.approx(12.61e-3, rel=0.01)


def test_opt_13b_on_a100_40gb_leaves_little_cache_room():
    card = model_card(OPT_13B, A100_40GB)
    # 40 x 0.9 = 36 GB - 25.71 - 3 = 7.29 GB, i.e. 7.29e9 / 819200 = 8,902 tokens.
    assert card.kv_cache_bytes_available == pytest.approx(7.293e9, rel=1e-3)
    assert card.kv_tokens_capacity == 8_902


def test_explicit_allowance_replaces_the_default():
    allowance = MemoryAllowance(gpu_memory_utilization=1.0, activation_peak_bytes=0, non_torch_bytes=0)
    card = model_card(LLAMA_3_1_8B, H100_SXM_80GB, allowance)
    # All 80 GB but the 16.06 GB of weights.
    assert card.kv_cache_bytes_available == pytest.approx(80e9 - 16_060_522_496)
    assert card.allowance == allowance


def test_model_card_refuses_a_gpu_too_small_for_the_weights():
    small = GpuSpec(name="16 GB card", memory_bandwidth_bytes_per_s=1e12, peak_flops=1e14, memory_bytes=16e9)
    with pytest.raises(ValueError, match="^model:"):
        model_card(OPT_13B, small)


def test_parameter_override_wins_over_the_shape():
    shape = LLAMA_3_1_8B.model_copy(update={"num_parameters_override": 8_000_000_000})
    assert shape.num_parameters == 8_000_000_000
    assert model_card(shape, H100_SXM_80GB).weight_bytes == 16_000_000_000


def test_kv_bytes_per_token_follows_kv_heads_not_query_heads():
    # GQA: 8 KV heads, not 32 query heads.
    assert kv_bytes_per_token(LLAMA_3_1_8B) == 2 * 32 * 8 * 128 * 2


def test_roofline_single_sequence_is_the_weight_read_floor():
    # Batch 1, empty context: memory 4.79 ms beats compute 16.06e9 / 989e12 = 0.016 ms.
    floor = model_card(LLAMA_3_1_8B, H100_SXM_80GB).decode_step_floor_s
    assert roofline_step_cost_s(LLAMA_3_1_8B, H100_SXM_80GB, 1) == pytest.approx(floor)
    # Below the crossover extra sequences are free.
    assert roofline_step_cost_s(LLAMA_3_1_8B, H100_SXM_80GB, 256) == pytest.approx(floor)


def test_roofline_counts_kv_reads():
    # 64 sequences x 1024 tokens x 131072 bytes = 8.59e9 bytes of KV cache;
    # (16.06e9 + 8.59e9) / 3.35e12 = 7.358 ms.
    assert roofline_step_cost_s(LLAMA_3_1_8B, H100_SXM_80GB, 64, 1024) == pytest.approx(7.358e-3, rel=1e-3)


def test_roofline_turns_compute_bound_past_the_crossover():
    # 1000 x 2 x 8.03e9 / 989e12 = 16.24 ms > the 4.79 ms weight read.
    assert roofline_step_cost_s(LLAMA_3_1_8B, H100_SXM_80GB, 1000) == pytest.approx(16.24e-3, rel=1e-3)


@pytest.mark.parametrize(("batch", "context", "argument"), [(0, 0, "batch"), (4, -1, "context_tokens")])
def test_roofline_rejects_bad_arguments(batch, context, argument):
    with pytest.raises(ValueError, match=f"^{argument}:"):
        roofline_step_cost_s(LLAMA_3_1_8B, H100_SXM_80GB, batch, context)


def test_model_shape_forbids_unknown_fields():
    fields = LLAMA_3_1_8B.model_dump()
    with pytest.raises(pydantic.ValidationError):
        ModelShape(**fields, rope_theta=500000.0)


def test_model_shape_needs_head_dim_when_heads_do_not_divide_hidden():
    fields = LLAMA_3_1_8B.model_dump() | {"head_dim": None, "hidden_size": 4000, "num_attention_heads": 48}
    with pytest.raises(pydantic.ValidationError, match="head_dim"):
        ModelShape(**fields)


def test_model_shape_round_trips_through_a_dump():
    assert ModelShape.model_validate(OPT_13B.model_dump()) == OPT_13B
