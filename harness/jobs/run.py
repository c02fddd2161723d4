"""One run: drive one workload against a server (launched here or already running) into a run directory.

The run is assessed as soon as it ends (client-bound figures, lengths not known to be
exact) and appended to the results history; what it found comes back as a `RunResult`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.driver.backends import BackendName
from harness.driver.timeouts import DEFAULT_FIRST_BYTE_TIMEOUT_S, DEFAULT_STALL_TIMEOUT_S
from harness.driver.work import DEFAULT_MAX_USERS
from harness.errors import UsageError
from harness.jobs.fields import WORKERS_HELP, Address, ExistingDir, OutDir, Positive, Workers
from harness.settings import Settings
from harness.systems import HF_SYSTEMS, SERVER_MODE, WAVE_SYSTEMS, ServerMode
from harness.telemetry.metrics import TELEMETRY_INTERVAL_S
from harness.workload.limits import MAX_REQUESTS, Seconds
from launchers import ServerConfig
from launchers.kinds import kind_of, launch_help

if TYPE_CHECKING:
    from harness.driver.backends import Backend
    from harness.driver.runner import RunOutcome

LAUNCH_HELP = f"start a server in this mode: {launch_help()}"


class RunJob(BaseModel):
    """What one run does: its settings, their defaults and ranges (the command's flags come from here)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str = Field(description="workload YAML file or built-in name (e.g. cpu-anyscale-cap128)")
    # Exactly one of the two: the command line offers them as one choice.
    endpoint: str | None = Field(None, description="base URL of a running OpenAI-compatible server",
                                 json_schema_extra={"cli": False})
    launch: ServerMode | None = Field(None, description=LAUNCH_HELP, json_schema_extra={"cli": False})
    # The model the endpoint must serve; None: its only one (a launched server serves ServerConfig.model).
    served_model: str | None = Field(None, json_schema_extra={"cli": False})
    out: OutDir = Field(description="new directory for the run's tables and manifest")
    system: str | None = Field(
        None, description="label and client behaviour: continuous, static, naive (padded waves of B from the"
        " client), client-static (unpadded waves of B from the client, formed by the static rule with"
        f" --batch-wait-s: static batching on any server), {', '.join(HF_SYSTEMS)}; default: the launched mode, or"
        " continuous for --endpoint",
    )
    backend: BackendName | None = Field(
        None, description="the kind of server at --endpoint, which sets how lengths are forced and tokens counted"
        " (docs/servers.md): vllm, transformers (`transformers serve`), sglang, tgi (lengths only capped), llamacpp"
        " (`llama-server`), trtllm (`trtllm-serve`), or openai (any other: lengths only capped, never exact);"
        " default: the launched server's kind, else vllm",
    )
    tokenizer: ExistingDir | None = Field(
        None, description="tokenizer directory for prompts (default: the served model's directory)"
    )
    api_key_env: str | None = Field(None, description="send the bearer token held in this environment variable",
                                    json_schema_extra={"metavar": "NAME"})
    ui: bool = Field(False, description="also serve Locust's web UI on 127.0.0.1:8089")
    allow_length_mismatch: bool = Field(False, description="exit 0 even if outputs differ from the plan")
    telemetry_interval_s: Seconds = Field(TELEMETRY_INTERVAL_S, description="how often to poll /metrics")
    stall_timeout_s: Seconds = Field(
        DEFAULT_STALL_TIMEOUT_S, description="fail a request whose stream pauses this long after it began"
    )
    first_byte_timeout_s: Seconds = Field(
        DEFAULT_FIRST_BYTE_TIMEOUT_S, description="fail a request with no byte this long after sending (it covers"
        " queueing in the server, so raise it for bursts that queue longer)",
    )
    warmup: bool = Field(True, description="skip the warm-up batches")
    max_users: Positive = Field(DEFAULT_MAX_USERS, le=MAX_REQUESTS,
                                description="most concurrent users for open-loop arrivals")
    workers: Workers = Field(1, description=WORKERS_HELP)
    master_bind: Address | None = Field(
        None, description="listen here for --workers workers from other machines (`batchbench worker --master"
        " HOST:PORT` on each) instead of starting them; e.g. 0.0.0.0:5557 (default port 5557)",
        json_schema_extra={"metavar": "HOST[:PORT]"},
    )
    # The results history the run is appended to; None: none (the command's --no-history).
    history: Path | None = Field(None, json_schema_extra={"cli": False})

    @model_validator(mode="after")
    def _one_server(self) -> RunJob:
        if (self.endpoint is None) == (self.launch is None):
            raise ValueError("name one server: an endpoint or a mode to launch")
        return self

    @property
    def system_name(self) -> str:
        """The system measured: as given, else the launched mode, else continuous; UsageError if they disagree."""
        system = self.system or self.launch or "continuous"
        if system not in SERVER_MODE:
            raise UsageError(f"unknown system {system!r}: use one of {', '.join(SERVER_MODE)}")
        if self.launch and SERVER_MODE[system] != self.launch:
            if system not in WAVE_SYSTEMS:
                raise UsageError(f"--system {system} does not match --launch {self.launch}")
            raise UsageError(f"--system {system} sends waves from the client: launch a {SERVER_MODE[system]} server"
                             " for it")
        return system


@dataclass(frozen=True)
class RunResult:
    """What a run found: its outcome (counts, row problems) and what the command should warn of."""

    outcome: RunOutcome
    backend: str
    # Each reason a figure of the run is the client's, not the server's.
    client_bound: tuple[str, ...]


def run_workload(job: RunJob, server: ServerConfig) -> RunResult:
    """Make the run `job` names, on a server launched from `server` or at `job.endpoint`.

    Refuses bad input (UsageError) before a server starts. Drives load: the process must
    be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched
    from harness.workload import build_plan, load_spec

    require_patched("harness.jobs.run")
    # Bad input is refused before the load, analysis and history code is imported (seconds).
    spec = load_spec(job.workload)
    system = job.system_name
    backend = _backend(job, spec.endpoint)
    headers = _headers(job.api_key_env)

    from harness.analysis.assess import assess_run_dirs
    from harness.calibration.marking import calibration_server_info, is_calibration_owner
    from harness.driver.backends import check_distributable
    from harness.driver.distributed.shard import check_workers, cluster_spec
    from harness.driver.distributed.wire import parse_address
    from harness.driver.endpoint import check_max_num_seqs, load_tokenizer, probe_endpoint
    from harness.driver.runner import RunRequest, execute, require_new_dir
    from harness.driver.timeouts import Timeouts
    from harness.driver.work import check_fits, check_one_process, user_count
    from harness.history import HistoryStore
    from harness.history.record import record
    from harness.sweep.servers import run_targets

    # Checked before a server is started, not only when the run begins.
    require_new_dir(job.out)
    store = None if job.history is None else HistoryStore(job.history)
    plan = build_plan(spec)
    # What the plan refuses for this system (naive on a conversation) before a server starts; the context once
    # the server says it.
    check_fits(plan, system, server.max_num_seqs, None)
    cluster = cluster_spec(job.workers, parse_address(job.master_bind) if job.master_bind else None)
    if cluster is not None:
        check_one_process(system)
        check_workers(cluster.workers, user_count(plan, system, server.max_num_seqs, job.max_users))
        check_distributable(backend)
    with contextlib.ExitStack() as stack:
        server_info = None
        if job.launch:
            # The server's log beside the run directory, not in it: only the run makes the run directory.
            target = run_targets(server, job.out.parent / f".{job.out.name}-server", stack,
                                 modes=(job.launch,), workloads=(spec,))[job.launch]
            endpoint, server_info = target.endpoint, target.server
        else:
            assert job.endpoint is not None, "RunJob names one server"
            endpoint = probe_endpoint(job.endpoint, headers, job.served_model, backend)
            check_max_num_seqs(endpoint, server.max_num_seqs, headers, backend)
        if is_calibration_owner(endpoint.owned_by):
            server_info = calibration_server_info()
        check_fits(plan, system, server.max_num_seqs, endpoint.max_model_len)
        outcome = execute(
            RunRequest(
                spec=spec,
                system=system,
                batch_size=server.max_num_seqs,
                endpoint=endpoint,
                tokenizer=load_tokenizer(job.tokenizer, endpoint),
                out_dir=job.out,
                headers=headers,
                server=server_info,
                plan=plan,
                telemetry_interval_s=job.telemetry_interval_s,
                timeouts=Timeouts(job.first_byte_timeout_s, job.stall_timeout_s),
                max_users=job.max_users,
                warmup=job.warmup,
                ui=job.ui,
                cluster=cluster,
                backend=backend,
                batch_wait_s=server.batch_wait_s,
            )
        )
    assessed = assess_run_dirs([job.out], allow_partial=True).assessed
    if store is not None:
        record(store, assessed, "run", job.out.name)
    client_bound = tuple(reason for run in assessed for reason in run.health.client_bound)
    return RunResult(outcome, backend.name, client_bound)


def _backend(job: RunJob, endpoint: str) -> Backend:
    """The kind of server the run talks to, as it talks on the workload's `endpoint`: as given, else the
    launched server's kind, else vLLM."""
    from harness.driver.backends import BACKENDS, VLLM

    launched = BACKENDS[kind_of(job.launch).backend] if job.launch else None
    if job.backend is None:
        return (launched or VLLM).for_endpoint(endpoint)
    if launched is not None and job.backend != launched.name:
        raise UsageError(f"--launch {job.launch} starts a {launched.name} server: --backend {job.backend}"
                         " is for a server at --endpoint")
    return BACKENDS[job.backend].for_endpoint(endpoint)


def _headers(api_key_env: str | None) -> dict[str, str]:
    if api_key_env is None:
        return {}
    key = Settings.from_env().variable(api_key_env)
    if not key:
        raise UsageError(f"--api-key-env {api_key_env}: that environment variable is not set")
    return {"Authorization": f"Bearer {key}"}
