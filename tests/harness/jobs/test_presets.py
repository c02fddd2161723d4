"""Per-system B (harness.jobs.batches) and the published setup as a preset (harness.jobs.presets): pure."""

from __future__ import annotations

from typing import get_args

import pytest

from harness.errors import UsageError
from harness.jobs.batches import SystemBatches, preset_batches, uniform_batches, vllm_default_max_num_seqs
from harness.jobs.presets import ANYSCALE_2023, PRESETS, PresetName, find_preset
from harness.paper.gpu_setups import ANYSCALE_OPT_13B_A100
from harness.workload import load_specs

GIB = 2**30
CAPS = ("anyscale-cap32", "anyscale-cap128", "anyscale-cap512", "anyscale-cap1536")
H100 = [("NVIDIA H100 80GB HBM3", 80 * GIB)] * 8


def test_the_flag_offers_every_preset():
    assert set(get_args(PresetName)) == set(PRESETS)


def test_anyscale_2023_is_the_published_setup_at_full_size():
    preset = find_preset("anyscale-2023")
    assert (preset.model, preset.gpu) == ("opt-13b", "a100-40gb")
    assert preset.workloads == CAPS
    # Static and naive at 16/12/8/4 for caps 32/128/512/1536, as predict models them on paper.
    assert [preset.wave_batches[cap] for cap in CAPS] == [16, 12, 8, 4]
    assert all(ANYSCALE_OPT_13B_A100.settings(cap).batch_size == preset.wave_batches[cap] for cap in CAPS)
    # Anyscale's full sizes: 1,000 prompts of 512 tokens, every one sent at once.
    for spec in load_specs(list(preset.workloads)):
        assert spec.num_requests == 1000
        assert (spec.prompt_tokens.kind, spec.prompt_tokens.value) == ("fixed", 512)
        assert spec.arrival.kind == "burst"


def test_an_unknown_preset_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown; use one of anyscale-2023"):
        find_preset("anyscale-2024")


@pytest.mark.parametrize(
    ("cards", "batch", "where"),
    [
        ([], 128, "on the CPU"),
        (H100, 1024, "NVIDIA H100 80GB HBM3 of 80 GiB"),
        ([("NVIDIA A100-SXM4-80GB", 80 * GIB)], 256, "A100-SXM4-80GB"),
        ([("NVIDIA A100-SXM4-40GB", 40 * GIB)], 256, "40 GiB"),
        ([("NVIDIA L4", 23 * GIB)], 256, "L4"),
        ([("NVIDIA B200", 180 * GIB)], 1024, "B200"),
    ],
)
def test_vllms_own_default_b_follows_its_rule_for_the_card(cards, batch, where):
    found, why = vllm_default_max_num_seqs(cards)
    assert found == batch
    assert where in why


def test_a_preset_runs_continuous_at_vllms_default_and_static_and_naive_per_workload():
    batches = preset_batches(ANYSCALE_2023, CAPS, None, H100)
    assert not batches.uniform
    assert [batches.of("continuous", cap) for cap in CAPS] == [1024] * 4
    assert [batches.of("static", cap) for cap in CAPS] == [16, 12, 8, 4]
    assert [batches.of("naive", cap) for cap in CAPS] == [16, 12, 8, 4]
    # One static server per B, in the order the workloads run.
    assert batches.wave_groups(CAPS) == [(16, ("anyscale-cap32",)), (12, ("anyscale-cap128",)),
                                         (8, ("anyscale-cap512",)), (4, ("anyscale-cap1536",))]
    assert batches.largest_wave(CAPS[1:]) == 12
    line = batches.line(CAPS)
    assert "continuous 1024 (vLLM's own default on NVIDIA H100" in line
    assert "16 (anyscale-cap32), 12 (anyscale-cap128), 8 (anyscale-cap512), 4 (anyscale-cap1536)" in line


def test_a_given_b_is_continuous_only():
    batches = preset_batches(ANYSCALE_2023, CAPS[:2], 64, H100)
    assert batches.of("continuous", "anyscale-cap128") == 64
    assert batches.of("static", "anyscale-cap128") == 12
    assert "continuous 64 (--max-num-seqs)" in batches.line(CAPS[:2])


def test_a_continuous_b_below_a_naive_wave_is_refused():
    with pytest.raises(UsageError, match="--max-num-seqs 8: below anyscale-2023's naive B of 16 at anyscale-cap32"):
        preset_batches(ANYSCALE_2023, CAPS, 8, [])


def test_a_workload_the_preset_gives_no_b_is_refused():
    with pytest.raises(UsageError, match="--workloads cpu-anyscale-cap32: anyscale-2023 sets static and naive B"):
        preset_batches(ANYSCALE_2023, ["cpu-anyscale-cap32"], None, [])


def test_one_b_for_every_system_is_one_group():
    batches = uniform_batches(32)
    assert batches.uniform
    assert {batches.of(system, "w") for system in ("continuous", "static", "naive", "client-static")} == {32}
    assert batches.wave_groups(["a", "b"]) == [(32, ("a", "b"))]
    assert batches.line(["a"]) == "B = 32 for every system (--max-num-seqs)"


def test_groups_keep_the_order_given_and_gather_equal_b():
    batches = SystemBatches(64, waves={"a": 8, "b": 4, "c": 8})
    assert batches.wave_groups(["a", "b", "c"]) == [(8, ("a", "c")), (4, ("b",))]
    assert batches.of("hf-continuous", "a") == 64
