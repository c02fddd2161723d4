"""A job's vLLM servers placed on GPU cards given as data: the configs they launch with."""

from __future__ import annotations

import json

import pytest

from harness.errors import UsageError
from harness.sweep.placing import context_tokens, job_placement, model_shape, parallel_size, placed_configs
from harness.workload import BurstArrival, FixedLength, WorkloadSpec
from launchers.spec import ServerConfig, ServerSpec

H100 = ("NVIDIA H100 80GB HBM3", 81_559 * 2**20)
A100_40 = ("NVIDIA A100-SXM4-40GB", 40_960 * 2**20)
MODES = ["continuous", "static"]


def workload(prompt: int, output: int) -> WorkloadSpec:
    return WorkloadSpec(name=f"w{prompt}-{output}", seed=0, num_requests=4, prompt_tokens=FixedLength(value=prompt),
                        output_tokens=FixedLength(value=output), arrival=BurstArrival())


def test_on_one_h100_each_server_gets_its_share_and_the_card():
    server = ServerConfig(model="llama-3.1-8b", max_num_seqs=64, vllm_args=("--enforce-eager",))
    configs = placed_configs(server, MODES, [workload(512, 512)], [H100])
    for mode in MODES:
        assert configs[mode].vllm_args == ("--enforce-eager", "--gpu-memory-utilization", "0.45")
        assert configs[mode].environment() == {"CUDA_VISIBLE_DEVICES": "0"}


def test_two_cards_put_each_server_on_its_own():
    configs = placed_configs(ServerConfig(model="llama-3.1-8b", max_num_seqs=64), MODES, [workload(512, 128)],
                             [H100, H100])
    assert [configs[mode].environment()["CUDA_VISIBLE_DEVICES"] for mode in MODES] == ["0", "1"]


def test_nothing_is_placed_without_cards_with_the_users_own_placement_or_an_unknown_model():
    server = ServerConfig(model="llama-3.1-8b", max_num_seqs=64)
    assert placed_configs(server, MODES, [workload(512, 128)], []) == dict.fromkeys(MODES, server)
    own = server.model_copy(update={"server_env": ("CUDA_VISIBLE_DEVICES=3",)})
    assert placed_configs(own, MODES, [workload(512, 128)], [H100]) == dict.fromkeys(MODES, own)
    hub = ServerConfig(model="meta-llama/Llama-3.1-8B", max_num_seqs=64)
    assert placed_configs(hub, MODES, [workload(512, 128)], [H100]) == dict.fromkeys(MODES, hub)


def test_one_server_at_a_time_is_placed_and_a_job_that_keeps_its_servers_up_refuses_it_in_one_line():
    server = ServerConfig(model="opt-13b", max_num_seqs=8)
    placed = job_placement(server, MODES, [workload(512, 128)], [A100_40])
    assert placed.one_at_a_time and "one fits at 0.9 of 43 GB, 2 at 0.45 each do not" in placed.why
    assert [placed.configs[mode].vllm_args for mode in MODES] == [("--gpu-memory-utilization", "0.9")] * 2
    with pytest.raises(UsageError, match="keeps its servers up side by side"):
        placed_configs(server, MODES, [workload(512, 128)], [A100_40])


def test_placement_one_at_a_time_is_forced_on_a_cpu_host_and_a_bad_value_is_refused():
    server = ServerConfig(model="tiny", placement="one-at-a-time")
    placed = job_placement(server, MODES, [workload(16, 16)], [])
    assert placed.one_at_a_time and placed.configs == dict.fromkeys(MODES, server)
    assert placed.line() == ("one at a time: forced (--placement one-at-a-time) on a host where both fit side by"
                             " side")
    # One server needs no turns.
    assert not job_placement(server, ["continuous"], [workload(16, 16)], []).one_at_a_time
    assert job_placement(ServerConfig(model="tiny"), MODES, [workload(16, 16)], []).how is None
    with pytest.raises(UsageError, match="unknown placement 'alone': use one of auto, shared, one-at-a-time"):
        ServerSpec.of(ServerConfig.model_construct(placement="alone"), "continuous")
def test_shapes_come_from_profiles_with_their_layers_and_from_directories(tmp_path):
    assert model_shape("llama-3.1-8b").num_layers == 32
    assert model_shape("llama-3.1-8b:layers=4").num_layers == 4
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 256, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert model_shape(str(tmp_path)).hidden_size == 64
    assert model_shape("org/model") is None


def test_the_context_is_the_largest_mean_prompt_plus_output_and_parallel_sizes_are_read():
    assert context_tokens([workload(512, 128), workload(100, 900)]) == 1000
    assert parallel_size(["--tensor-parallel-size", "2", "-dp=4"], "tensor") == 2
    assert parallel_size(["--tensor-parallel-size", "2", "-dp=4"], "data") == 4
    assert parallel_size([], "tensor") == 1
    with pytest.raises(UsageError, match="-tp: needs a whole number"):
        parallel_size(["-tp", "two"], "tensor")
