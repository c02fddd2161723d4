"""Predictions on paper for the published setups: pinned, so a change that moves them is seen."""

from __future__ import annotations

import pytest

from harness.paper.gpu_predict import SCALED_CONSTANTS, predict_workload, sensitivity
from harness.paper.gpu_setups import ANYSCALE_OPT_13B_A100, SEED_LLAMA_3_1_8B_H100, find_setup, setup_for_profile
from harness.workload.spec import load_spec

CAPS = (32, 128, 512, 1536)


@pytest.fixture(scope="module")
def anyscale():
    return {cap: predict_workload(ANYSCALE_OPT_13B_A100, load_spec(f"anyscale-cap{cap}")) for cap in CAPS}


# The four continuous predictions (tok/s) with the sourced constants. Published: 6,121 / 3,592 / 2,029 /
# 1,898; these are -6.7% / +10.4% / +19.5% / +19.3% from them (docs/validation/predictions-on-paper.md).
PINNED_CONTINUOUS = {32: 5713.2, 128: 3966.9, 512: 2424.7, 1536: 2264.1}


def test_the_four_opt_13b_predictions_are_pinned(anyscale):
    for cap, expected in PINNED_CONTINUOUS.items():
        assert anyscale[cap].continuous.total_tokens_per_s == pytest.approx(expected, rel=1e-4), cap


def test_published_figures_and_settings_ride_along(anyscale):
    assert [anyscale[c].settings.published_continuous_tok_s for c in CAPS] == [6121, 3592, 2029, 1898]
    assert [anyscale[c].max_num_batched_tokens for c in CAPS] == [8700, 7500, 8100, 8100]
    assert [anyscale[c].batch_size for c in CAPS] == [16, 12, 8, 4]
    ratio = anyscale[32].continuous_ratio
    assert ratio == pytest.approx(5713.2 / 6121, rel=1e-4)


def test_continuous_beats_static_by_more_as_the_spread_grows(anyscale):
    gaps = [anyscale[c].continuous.total_tokens_per_s / anyscale[c].static.total_tokens_per_s for c in CAPS]
    assert gaps == sorted(gaps)
    assert gaps[0] > 1


def test_published_naive_is_several_times_below_the_padded_floor(anyscale):
    widest = anyscale[1536]
    assert widest.naive_floor.total_tokens_per_s == pytest.approx(516.8, rel=1e-3)
    assert widest.naive_floor_over_published == pytest.approx(516.8 / 81, rel=1e-3)
    assert anyscale[32].naive_floor_over_published is None


def test_seed_static_against_continuous_at_256_on_an_h100():
    prediction = predict_workload(SEED_LLAMA_3_1_8B_H100, load_spec("seed-100-200-300-1000"))
    assert prediction.batch_size == 256
    assert prediction.continuous.limits.max_num_seqs == 256
    assert prediction.continuous.total_tokens_per_s == pytest.approx(23_868.7, rel=1e-4)
    assert prediction.static.total_tokens_per_s == pytest.approx(15_883.4, rel=1e-4)
    # Four static batches of up to 256, each held for its 1000-token members: 4000 steps.
    assert prediction.static.num_steps == 4000


def test_sensitivity_moves_each_constant_the_way_physics_says():
    rows = {row.constant: row for row in sensitivity(ANYSCALE_OPT_13B_A100, [load_spec("anyscale-cap512")])}
    assert tuple(rows) == SCALED_CONSTANTS
    base = predict_workload(ANYSCALE_OPT_13B_A100, load_spec("anyscale-cap512")).continuous.total_tokens_per_s
    for name in ("efficiency", "bandwidth", "flops", "kv_cache"):
        assert rows[name].low["anyscale-cap512"] < base < rows[name].high["anyscale-cap512"], name
    assert rows["overhead"].low["anyscale-cap512"] > base > rows["overhead"].high["anyscale-cap512"]
    # Efficiency and peak FLOP/s enter only as their product.
    assert rows["efficiency"].low == pytest.approx(rows["flops"].low)


def test_a_workload_that_is_not_a_burst_is_refused():
    with pytest.raises(ValueError, match="burst"):
        predict_workload(ANYSCALE_OPT_13B_A100, load_spec("cpu-poisson"))


def test_setups_are_found_by_model_and_gpu():
    assert find_setup("opt-13b", "a100-40gb") is ANYSCALE_OPT_13B_A100
    assert setup_for_profile("llama-3.1-8b") is SEED_LLAMA_3_1_8B_H100
    assert setup_for_profile("tiny") is None
    with pytest.raises(ValueError, match="known pairs"):
        find_setup("opt-13b", "h100")
    # 12 GiB of 800 KiB tokens: the vLLM paper's 15.7K slots.
    assert ANYSCALE_OPT_13B_A100.kv_tokens == 15_728
