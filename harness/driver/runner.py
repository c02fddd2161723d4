"""One measured run: plan, prompts, Locust users, telemetry (server and GPU), tables, manifest.

Runs inside a gevent-patched process (Locust patches on import). A run's progress
lines all go to this module's `logger` at INFO (the CLI shows them; a sweep indents them).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import gevent

from harness.driver.backends import VLLM, Backend, check_distributable, text_token_counter
from harness.driver.dispatch import Dispatcher, WaveRule, WorkSource
from harness.driver.distributed.cluster import Cluster
from harness.driver.distributed.shard import ClusterSpec, check_workers
from harness.driver.distributed.wire import Brief
from harness.driver.endpoint import EndpointInfo, server_token_counter, warm_up
from harness.driver.http_client import allow_open_files, load_client
from harness.driver.journal import RunJournal
from harness.driver.load import LiveLoad
from harness.driver.steps import StepLogCursor
from harness.driver.tables import RunTables, write_tables
from harness.driver.timeouts import Timeouts
from harness.driver.user import DriverContext
from harness.driver.work import (
    CLIENT_STATIC,
    DEFAULT_MAX_USERS,
    WorkItem,
    build_work,
    check_fits,
    user_count,
    warm_up_choice,
)
from harness.errors import UsageError
from harness.rundir.manifest import RunCounts, RunManifest, ServerRecord, git_sha, harness_version, host_info
from harness.rundir.records import MANIFEST_FILE, PLAN_FILE
from harness.telemetry.gpu import GpuSampler, write_gpu_table
from harness.telemetry.metrics import TELEMETRY_INTERVAL_S, TelemetrySampler
from harness.workload import RequestPlan, WorkloadSpec, build_plan, make_prompts

logger = logging.getLogger(__name__)
# Spawning every user at once is what an open-loop burst needs; Locust warns about it.
logging.getLogger("locust.runners").setLevel(logging.ERROR)

# Prompts checked against the server's own /tokenize (the rest trust the same tokenizer).
VERIFIED_PROMPTS = 8


@dataclass
class RunRequest:
    """Everything one run needs; built by the CLI (or a sweep) and validated there."""

    spec: WorkloadSpec
    system: str
    batch_size: int
    endpoint: EndpointInfo
    tokenizer: Any
    out_dir: Path
    headers: dict[str, str] = field(default_factory=dict)
    server: dict[str, Any] | None = None
    # Built and checked by the caller before any heavy work; else built from `spec` here.
    plan: RequestPlan | None = None
    telemetry_interval_s: float = TELEMETRY_INTERVAL_S
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_users: int = DEFAULT_MAX_USERS
    warmup: bool = True
    ui: bool = False
    ui_port: int = 8089
    # Several load processes under Locust's master (harness.driver.distributed.cluster); None: this process alone.
    cluster: ClusterSpec | None = None
    # The kind of server: how requests ask for their length, how tokens are counted (harness.driver.backends).
    backend: Backend = VLLM
    # client-static: how long the oldest arrival waits for a full wave (the static server's batch wait).
    batch_wait_s: float = 0.0


@dataclass
class RunOutcome:
    """How a run ended, for the caller's exit code and message."""

    out_dir: Path
    counts: RunCounts
    duration_s: float
    output_tokens_per_s: float
    # What is wrong with the rows against the plan (harness.rundir.accounting); empty when they match.
    row_problems: list[str] = field(default_factory=list)


def require_new_dir(directory: Path, what: str = "output directory") -> None:
    """Refuse a directory that already holds something: runs and reports are never overwritten."""
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{what} {directory} is not empty: choose a new one (runs are never overwritten)")


def prepare_out_dir(out_dir: Path) -> None:
    """Refuse to write over an earlier run (nothing lost); create the directory."""
    require_new_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def write_manifest(manifest: RunManifest, out_dir: Path) -> None:
    """Write manifest.json atomically (a reader never sees half a file)."""
    staging = out_dir / (MANIFEST_FILE + ".tmp")
    staging.write_text(manifest.model_dump_json(indent=2))
    staging.replace(out_dir / MANIFEST_FILE)


def execute(request: RunRequest) -> RunOutcome:
    """Run the workload against the endpoint and write the run directory.

    In steps: prepare (prompts, warm-up, plan and manifest on disk), start the load,
    wait for its last request, then write the tables and say how it went. However the
    wait ends (the run's end, Ctrl-C or SIGTERM, an error), every part of the live load
    is stopped, each once, before anything else. After Ctrl-C or SIGTERM the finished
    rows are kept, every other owed request gets a not_sent or lost row, the manifest
    says incomplete, and KeyboardInterrupt is raised again.
    """
    plan = request.plan or build_plan(request.spec)
    users = user_count(plan, request.system, request.batch_size, request.max_users)
    if request.cluster is not None:
        # Refused before any worker starts: more workers than concurrent users would idle.
        check_workers(request.cluster.workers, users)
        check_distributable(request.backend)
    with contextlib.ExitStack() as stack:
        cluster = None
        if request.cluster is not None:
            cluster = stack.enter_context(Cluster(request.cluster, request.endpoint.base_url))
            cluster.open()
        run = _prepare(request, plan)
        # Entered before the load, so it stops after it: its last sample covers the run's end.
        gpu = stack.enter_context(GpuSampler(server_url=request.endpoint.base_url))
        logger.info(gpu.info.note)
        load: LiveLoad | Cluster
        if cluster is None:
            load = _start_load(request, run, users, stack)
            interrupted = _wait(load.context.dispatcher)
        else:
            load = _start_cluster(request, run, users, cluster)
            interrupted = cluster.wait()
        ended = time.time()
    tables = write_tables(request.out_dir, run.items, load.stopped(), run.steps, run.run_tag)
    if gpu.info.devices:
        write_gpu_table(request.out_dir, gpu.samples)
    run.manifest.gpu_telemetry = gpu.info
    run.manifest.ended_at, run.manifest.counts, run.manifest.complete = ended, tables.counts, not interrupted
    run.manifest.client_health = load.health
    run.manifest.load_processes = cluster.processes() if cluster is not None else None
    run.manifest.engine_steps = run.steps is not None
    write_manifest(run.manifest, request.out_dir)
    return _outcome(request, load, tables, ended, interrupted)


@dataclass
class _PreparedRun:
    """A run ready to start: its work items, and the plan and manifest already on disk."""

    plan: RequestPlan
    items: list[WorkItem]
    manifest: RunManifest
    # Inside every X-Request-Id, so the engine's step log can be matched to this run.
    run_tag: str
    # Where the server's step log stands before the run (None: the server keeps none).
    steps: StepLogCursor | None


def _prepare(request: RunRequest, plan: RequestPlan) -> _PreparedRun:
    """Prompts of exact length, warm-up; then the plan and manifest in a new run directory."""
    check_fits(plan, request.system, request.batch_size, request.endpoint.max_model_len)
    if plan.trace_clipped:
        trace = request.spec.trace
        limit = trace.max_tokens if trace is not None else None
        logger.info(f"{plan.trace_clipped} of {len(plan.requests)} trace rows were longer than max_tokens {limit}"
                    " and were clipped to it (output first, then prompt): they are sent as planned (plan.json)")
    logger.info(f"building {len(plan.requests)} prompts of exact token length")
    prompts = make_prompts(plan, request.tokenizer)
    if request.spec.endpoint == "completions":
        _check_with_server(plan, prompts, request)
    items = build_work(plan, prompts, request.system, request.batch_size)
    # Before anything is written: a run whose warm-up fails leaves nothing behind.
    if request.warmup:
        logger.info(f"warming up: 2 rounds of {request.batch_size} concurrent requests")
        # A prompt with room for its tokens in the context, whatever the plan's first prompt is.
        chosen, tokens = warm_up_choice(plan, request.endpoint.max_model_len)
        warm_up(request.endpoint, request.headers, request.batch_size, prompts[chosen], request.timeouts.stall_s,
                backend=request.backend, tokens=tokens)
    prepare_out_dir(request.out_dir)
    (request.out_dir / PLAN_FILE).write_bytes(plan.to_json())
    run_tag = secrets.token_hex(4)
    manifest = RunManifest(
        run_id=request.out_dir.name,
        system=request.system,
        workload=request.spec,
        plan_sha256=plan.sha256(),
        batch_size=request.batch_size,
        endpoint=request.endpoint.base_url,
        model=request.endpoint.model,
        server=None if request.server is None else ServerRecord.model_validate(request.server),
        server_version=request.endpoint.server_version,
        harness_version=harness_version(),
        git_sha=git_sha(),
        locust_version=metadata.version("locust"),
        host=host_info(),
        telemetry_interval_s=request.telemetry_interval_s,
        started_at=time.time(),
        counts=RunCounts(planned=len(items)),
        run_tag=run_tag,
        backend=request.backend.name,
        client_batch_wait_s=request.batch_wait_s if request.system == CLIENT_STATIC else None,
    )
    write_manifest(manifest, request.out_dir)
    step_log = (request.server or {}).get("step_log")
    return _PreparedRun(plan, items, manifest, run_tag, StepLogCursor(Path(step_log)) if step_log else None)


def _start_load(request: RunRequest, run: _PreparedRun, users: int, stack: contextlib.ExitStack) -> LiveLoad:
    """Telemetry, `users` load users, the client monitor, then the run clock; `stack` stops them all."""
    allow_open_files(users)
    context = DriverContext(
        Dispatcher(run.items, duration_s=run.plan.duration_s, rule=_wave_rule(request)),
        RunJournal(request.out_dir),
        load_client(request.endpoint.base_url, request.headers, request.timeouts, users),
        request.endpoint.model,
        request.spec.endpoint,
        run.run_tag,
        request.timeouts,
        backend=request.backend,
        count_tokens=text_token_counter(request.tokenizer) if request.backend.retokenizes else None,
    )
    # Entered at once, so whatever starts from here on is stopped, whatever happens next.
    load = stack.enter_context(LiveLoad(context, request.endpoint.base_url))
    load.create_runner(request.ui_port if request.ui else None)
    if request.ui:
        logger.info(f"Locust web UI at http://127.0.0.1:{request.ui_port}")
    if request.backend.metrics_path is None:
        logger.info(f"a {request.backend.name} server serves no /metrics with vLLM's names: no server telemetry")
    else:
        load.start_telemetry(
            TelemetrySampler(request.endpoint.base_url, request.telemetry_interval_s, request.headers)
        )
    load.start_users(users)
    # From the first send on: spawning the users is set-up, not the run.
    load.start_monitor()
    started = context.dispatcher.open()
    run.manifest.started_at = started
    logger.info(f"{request.system}: {len(run.items)} requests, {users} users, B={request.batch_size}")
    load.spawn(_report_progress, load, started)
    # A request that finishes during a long lull must reach the disk too.
    load.spawn(_flush_periodically, context.journal)
    return load


def _wave_rule(request: RunRequest) -> WaveRule | None:
    """How client-static forms its waves; None for every other system."""
    return WaveRule(request.batch_size, request.batch_wait_s) if request.system == CLIENT_STATIC else None


def _start_cluster(request: RunRequest, run: _PreparedRun, users: int, cluster: Cluster) -> Cluster:
    """Hand the run and its `users` users to the cluster's workers; start it at one instant t0."""
    template = Brief(
        index=0, base_url=request.endpoint.base_url, headers=request.headers, model=request.endpoint.model,
        endpoint=request.spec.endpoint, run_tag=run.run_tag, first_byte_timeout_s=request.timeouts.first_byte_s,
        stall_timeout_s=request.timeouts.stall_s, users=users, central=False, items=[],
    )
    sampler = TelemetrySampler(request.endpoint.base_url, request.telemetry_interval_s, request.headers)
    started = cluster.start(template, run.items, run.plan.duration_s, request.out_dir, sampler,
                            request.ui_port if request.ui else None)
    run.manifest.started_at = started
    assert request.cluster is not None
    logger.info(f"{request.system}: {len(run.items)} requests, {users} users on {request.cluster.workers} workers,"
                f" B={request.batch_size}")
    cluster.spawn(_report_progress, cluster, started)
    return cluster


def _wait(dispatcher: WorkSource) -> bool:
    """Wait for the run's last request; True if Ctrl-C or SIGTERM came first."""
    try:
        dispatcher.finished.wait()
    except KeyboardInterrupt:
        # Keep what was measured and mark the run incomplete; the caller raises it again.
        return True
    return False


def _outcome(
    request: RunRequest, load: LiveLoad | Cluster, tables: RunTables, ended: float, interrupted: bool
) -> RunOutcome:
    """Say how the run went; raise KeyboardInterrupt again if it was interrupted."""
    if interrupted:
        logger.info(f"interrupted: kept {tables.kept} finished requests in {request.out_dir} (marked incomplete)")
        raise KeyboardInterrupt
    counts = tables.counts
    assert load.started_s is not None, "the run clock started"
    duration = ended - load.started_s
    rate = load.generated_tokens / duration if duration > 0 else 0.0
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.failures.items())
    logger.info(
        f"done: {counts.ok}/{counts.planned - counts.not_due} ok,"
        f" {counts.failed} failed{f' ({kinds})' if kinds else ''},"
        f" {rate:.0f} generated tok/s over {duration:.1f} s, {len(load.samples)} telemetry samples -> {request.out_dir}"
    )
    return RunOutcome(request.out_dir, counts, duration, rate, tables.problems)


def _check_with_server(plan, prompts: list[str], request: RunRequest) -> None:
    """Count a few prompts with the server's own tokenizer: proves ours is the same."""
    counter = server_token_counter(request.endpoint, request.headers, request.backend)
    if counter is None:
        logger.info("server has no /tokenize: prompt lengths rest on the local tokenizer alone")
        return
    # Not strict: only the first few are compared, and build_work, next, refuses a count
    # mismatch with a message naming both counts.
    for planned, prompt in list(zip(plan.requests, prompts, strict=False))[:VERIFIED_PROMPTS]:
        counted = counter(prompt)
        if counted != planned.prompt_tokens:
            raise UsageError(
                f"request {planned.index}: the server counts {counted} prompt tokens, the plan wants"
                f" {planned.prompt_tokens}: is --tokenizer the served model's?"
            )


def _flush_periodically(journal: RunJournal) -> None:
    while True:
        gevent.sleep(journal.flush_interval_s)
        journal.flush()


def _report_progress(load: LiveLoad | Cluster, started: float) -> None:
    while True:
        gevent.sleep(2.0)
        elapsed = time.time() - started
        if elapsed <= 0:  # a distributed run's t0 lies a moment ahead
            continue
        logger.info(
            f"  {load.completed}/{load.total} done,"
            f" {load.generated_tokens / elapsed:.0f} tok/s, {load.failed} errors, {elapsed:.0f} s"
        )
