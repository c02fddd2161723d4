"""Placing a job's two servers on GPU inventories written as data, each checked against the memory arithmetic."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from harness.paper.physics import LLAMA_3_1_8B, OPT_13B, MemoryAllowance, kv_bytes_per_token
from harness.placement import Card, per_card_need, place_servers, server_starts, turn_order

# What NVML reports for each board (MiB x 2**20).
H100 = Card("NVIDIA H100 80GB HBM3", 81_559 * 2**20)
A100_40 = Card("NVIDIA A100-SXM4-40GB", 40_960 * 2**20)
A100_80 = Card("NVIDIA A100-SXM4-80GB", 81_920 * 2**20)
MODES = ("continuous", "static")
ALLOWANCES = MemoryAllowance().activation_peak_bytes + MemoryAllowance().non_torch_bytes


def test_one_h100_holds_both_llama_servers_side_by_side_at_equal_shares():
    placement = place_servers([H100], LLAMA_3_1_8B, MODES, batch_size=64, context_tokens=1024)
    assert placement.how == "shared" and not placement.one_at_a_time
    assert [(s.devices, s.memory_share) for s in placement.servers] == [((0,), 0.45), ((0,), 0.45)]
    # 16.1 GB of weights + 64 x 1,024 tokens x 128 KiB of KV + 3 GB of allowances, under 0.45 of the card.
    need = LLAMA_3_1_8B.num_parameters * 2 + 64 * 1024 * 131_072 + ALLOWANCES
    assert kv_bytes_per_token(LLAMA_3_1_8B) == 131_072
    assert per_card_need(LLAMA_3_1_8B, 64, 1024, 1, MemoryAllowance()) == pytest.approx(need)
    assert need <= 0.45 * H100.memory_bytes < 2 * need + 0.1 * H100.memory_bytes
    assert placement.servers[0].vllm_args() == ("--gpu-memory-utilization", "0.45")
    assert placement.servers[1].environment() == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "fit on the same card at 0.45" in placement.why


def test_opt_13b_on_one_a100_40gb_runs_one_server_at_a_time():
    placement = place_servers([A100_40], OPT_13B, MODES, batch_size=8, context_tokens=640)
    need = OPT_13B.num_parameters * 2 + 8 * 640 * kv_bytes_per_token(OPT_13B) + ALLOWANCES
    # One copy fits at 0.9 of the card; two at 0.45 each do not.
    assert 0.45 * A100_40.memory_bytes < need <= 0.9 * A100_40.memory_bytes
    assert placement.one_at_a_time
    assert [(s.devices, s.memory_share) for s in placement.servers] == [((0,), 0.9), ((0,), 0.9)]
    assert "one server at a time, restarted between systems" in placement.why


def test_eight_h100s_give_each_server_a_card_of_its_own():
    placement = place_servers([H100] * 8, LLAMA_3_1_8B, MODES, batch_size=256, context_tokens=2048)
    assert placement.how == "one card each"
    assert [s.environment()["CUDA_VISIBLE_DEVICES"] for s in placement.servers] == ["0", "1"]
    assert all(s.memory_share == 0.9 for s in placement.servers)


def test_opt_13b_over_two_a100_80gb_at_tensor_parallel_2_shares_both_cards():
    placement = place_servers([A100_80] * 2, OPT_13B, MODES, batch_size=16, context_tokens=1024, tensor_parallel=2)
    # Half the weights and half the KV cache per card, the allowances on each.
    need = (OPT_13B.num_parameters * 2 + 16 * 1024 * kv_bytes_per_token(OPT_13B)) / 2 + ALLOWANCES
    assert need <= 0.45 * A100_80.memory_bytes
    assert placement.how == "shared"
    assert [s.environment()["CUDA_VISIBLE_DEVICES"] for s in placement.servers] == ["0,1", "0,1"]
    four = place_servers([A100_80] * 4, OPT_13B, MODES, batch_size=16, context_tokens=1024, tensor_parallel=2)
    assert [s.devices for s in four.servers] == [(0, 1), (2, 3)] and four.how == "one card each"


@pytest.mark.parametrize(("cards", "model", "settings", "fragment"), [
    ([A100_40], OPT_13B, {"batch_size": 64, "context_tokens": 2048}, "OPT-13B at B = 64 x 2,048 tokens needs"),
    ([H100], LLAMA_3_1_8B, {"batch_size": 8, "context_tokens": 512, "data_parallel": 2},
     "data parallel 2: each rank runs its own scheduler"),
    ([H100], LLAMA_3_1_8B, {"batch_size": 8, "context_tokens": 512, "tensor_parallel": 2},
     "tensor parallel 2 x data parallel 1 needs 2 GPUs; this host has 1"),
    ([], LLAMA_3_1_8B, {"batch_size": 8, "context_tokens": 512}, "no GPU found"),
])
def test_what_cannot_be_placed_is_one_line_naming_why(cards, model, settings, fragment):
    with pytest.raises(UsageError) as raised:
        place_servers(cards, model, MODES, **settings)
    assert fragment in str(raised.value) and "\n" not in str(raised.value)


def test_a_forced_placement_is_kept_and_says_what_would_have_been_chosen():
    alone = place_servers([H100], LLAMA_3_1_8B, MODES, batch_size=64, context_tokens=1024, force="one at a time")
    assert alone.one_at_a_time and [s.memory_share for s in alone.servers] == [0.9, 0.9]
    assert alone.why.startswith("forced (--placement); this host would be shared:")
    shared = place_servers([A100_40], OPT_13B, MODES, batch_size=8, context_tokens=640, force="shared")
    assert shared.how == "shared" and [s.memory_share for s in shared.servers] == [0.45, 0.45]
    # Forcing what would be chosen anyway changes nothing.
    assert place_servers([A100_40], OPT_13B, MODES, 8, 640, force="one at a time") == place_servers(
        [A100_40], OPT_13B, MODES, 8, 640)


def test_one_at_a_time_runs_each_repetition_server_by_server_starting_with_the_server_up():
    # One workload's cells as a reproduction gives them: continuous, static, naive (naive on the continuous server).
    servers = ["continuous", "static", "continuous"] * 2
    assert turn_order(servers, None) == [0, 2, 3, 5, 1, 4]
    assert turn_order(servers, "static") == [1, 4, 0, 2, 3, 5]
    # Every run stays in its repetition: each order is a permutation of the repetition's cells.
    assert sorted(turn_order(servers, "static")) == list(range(len(servers)))
    # Two servers over three repetitions: 4 starts (3 restarts), not one per change of system (5 per repetition).
    assert server_starts(servers, 3) == 4
    assert server_starts(servers, 3, up="continuous") == 3
    assert server_starts(["continuous"] * 3, 5) == 1
