"""The `transformers serve` command line, its cache sizing and the models it refuses; pure, no server."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from launchers.models import ResolvedModel
from launchers.transformers_server import (
    CPU_MAX_BATCH_TOKENS,
    DEFAULT_CPU_CACHE_BYTES,
    TransformersSpec,
    build_transformers_command,
    check_servable,
)

TINY_DIR = ResolvedModel("tiny", "/tmp", "auto", "float32", "tiny", 4)
HUB = ResolvedModel("org/model", "org/model", "auto", None, None)


def test_continuous_batching_only_in_its_mode():
    continuous, _ = build_transformers_command(TransformersSpec(mode="hf-continuous"), TINY_DIR, 8001, "py")
    sequential, _ = build_transformers_command(TransformersSpec(mode="hf-sequential"), TINY_DIR, 8001, "py")
    assert continuous[:5] == ["py", "-m", "transformers.cli.transformers", "serve", "/tmp"]
    assert "--continuous-batching" in continuous and "--continuous-batching" not in sequential
    assert continuous[continuous.index("--port") + 1] == "8001"


def test_on_a_cpu_the_cache_is_a_fixed_share_of_host_memory():
    spec = TransformersSpec(mode="hf-continuous", max_batch_tokens=2048)
    argv, _ = build_transformers_command(spec, TINY_DIR, 8001, "py", host_memory_bytes=8 * DEFAULT_CPU_CACHE_BYTES)
    assert argv[argv.index("--cb-max-memory-percent") + 1] == "0.1250"
    assert argv[argv.index("--cb-max-batch-tokens") + 1] == "2048"
    on_gpu, _ = build_transformers_command(spec, TINY_DIR, 8001, "py", host_memory_bytes=None)
    assert "--cb-max-memory-percent" not in on_gpu


def test_on_a_cpu_the_token_budget_per_step_is_the_launchers_unless_given():
    default = TransformersSpec(mode="hf-continuous")
    on_cpu, _ = build_transformers_command(default, TINY_DIR, 8001, "py", host_memory_bytes=1 << 34)
    on_gpu, _ = build_transformers_command(default, TINY_DIR, 8001, "py", host_memory_bytes=None)
    assert on_cpu[on_cpu.index("--cb-max-batch-tokens") + 1] == str(CPU_MAX_BATCH_TOKENS)
    assert "--cb-max-batch-tokens" not in on_gpu
    sequential, _ = build_transformers_command(TransformersSpec(mode="hf-sequential"), TINY_DIR, 8001, "py", 1 << 34)
    assert "--cb-max-memory-percent" not in sequential


def test_its_temp_files_go_to_its_own_directory_and_the_compile_cache_to_the_harness_cache(tmp_path):
    spec = TransformersSpec(mode="hf-continuous")
    _, env = build_transformers_command(spec, HUB, 8001, "py", temp_dir=tmp_path / "tmp", cache_dir=tmp_path)
    assert env == {"TMPDIR": str(tmp_path / "tmp"), "TEMP": str(tmp_path / "tmp"), "TMP": str(tmp_path / "tmp"),
                   "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torchinductor")}
    _, placed = build_transformers_command(spec, HUB, 8001, "py", cache_dir=tmp_path,
                                           inherited={"TORCHINDUCTOR_CACHE_DIR": "/fast/disk"})
    assert placed == {}


def test_a_local_model_is_served_offline_a_hub_model_is_not():
    _, local = build_transformers_command(TransformersSpec(mode="hf-sequential"), TINY_DIR, 8001, "py")
    _, hub = build_transformers_command(TransformersSpec(mode="hf-sequential"), HUB, 8001, "py")
    assert local == {"HF_HUB_OFFLINE": "1"} and hub == {}


@pytest.mark.parametrize("model", ["llama-3.1-8b", "opt-13b:layers=1"])
def test_a_profile_without_weights_is_refused_by_name(model):
    with pytest.raises(UsageError, match=f"transformers serve loads real weights, and {model} has none"):
        check_servable(model)


def test_tiny_and_directories_are_servable(tmp_path):
    check_servable("tiny")
    check_servable(str(tmp_path))


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"mode": "static"}, "transformers server mode"),
    ({"mode": "hf-continuous", "max_batch_tokens": 0}, "transformers server max_batch_tokens"),
    ({"mode": "hf-continuous", "model": ""}, "transformers server model"),
])
def test_a_bad_value_is_one_usage_error(fields, fragment):
    with pytest.raises(UsageError, match=fragment) as raised:
        TransformersSpec(**fields)
    assert "\n" not in str(raised.value)
