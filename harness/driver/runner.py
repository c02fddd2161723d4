"""One measured run: plan, prompts, Locust users, telemetry, tables, manifest.

Runs inside a gevent-patched process (Locust patches on import). A run's progress
lines all go to this module's `logger` at INFO (the CLI shows them; a sweep indents them).
"""

from __future__ import annotations

import csv
import logging
import resource
import secrets
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import gevent
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from locust.env import Environment
from locust.html import get_html_report
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from harness.accounting import row_problems
from harness.driver.client_health import ClientMonitor
from harness.driver.dispatch import Dispatcher
from harness.driver.endpoint import EndpointInfo, server_token_counter, warm_up
from harness.driver.journal import RunJournal
from harness.driver.outcome import LOST, NOT_SENT, Failure, unanswered_row
from harness.driver.steps import StepLogCursor
from harness.driver.timeouts import CONNECT_TIMEOUT_S, Timeouts
from harness.driver.user import DriverContext, make_user_class
from harness.driver.work import DEFAULT_MAX_USERS, build_work, check_fits, user_count
from harness.errors import UsageError
from harness.manifest import RunCounts, RunManifest, git_sha, harness_version, host_info
from harness.records import MANIFEST_FILE, PLAN_FILE, STEPS_FILE, TELEMETRY_FILE, TELEMETRY_SCHEMA
from harness.telemetry import TelemetrySampler
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
    telemetry_interval_s: float = 0.25
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_users: int = DEFAULT_MAX_USERS
    warmup: bool = True
    ui: bool = False
    ui_port: int = 8089


@dataclass
class RunOutcome:
    """How a run ended, for the caller's exit code and message."""

    out_dir: Path
    counts: RunCounts
    duration_s: float
    output_tokens_per_s: float
    # What is wrong with the rows against the plan (harness.accounting); empty when they match.
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


# Sockets beyond the users' own: telemetry, the step log, parquet files, Locust's own.
_SPARE_FILES = 256


def _allow_open_files(users: int) -> None:
    """Raise this process's open-file limit to hold one socket per user, or say why not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = users + _SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise UsageError(f"{users} concurrent users need {needed} open files, but the hard limit is {hard}:"
                             " lower --max-users or raise `ulimit -Hn`")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def execute(request: RunRequest) -> RunOutcome:
    """Run the workload against the endpoint and write the run directory."""
    plan = request.plan or build_plan(request.spec)
    check_fits(plan, request.system, request.batch_size, request.endpoint.max_model_len)
    logger.info(f"building {len(plan.requests)} prompts of exact token length")
    prompts = make_prompts(plan, request.tokenizer)
    if request.spec.endpoint == "completions":
        _check_with_server(plan, prompts, request)
    items = build_work(plan, prompts, request.system, request.batch_size)
    # Before anything is written: a run whose warm-up fails leaves nothing behind.
    if request.warmup:
        logger.info(f"warming up: 2 rounds of {request.batch_size} concurrent requests")
        warm_up(request.endpoint, request.headers, request.batch_size, prompts[0], request.timeouts.stall_s)
    prepare_out_dir(request.out_dir)
    (request.out_dir / PLAN_FILE).write_bytes(plan.to_json())

    run_tag = secrets.token_hex(4)
    manifest = RunManifest(
        run_id=request.out_dir.name,
        system=request.system,
        workload=request.spec.model_dump(mode="json"),
        plan_sha256=plan.sha256(),
        batch_size=request.batch_size,
        endpoint=request.endpoint.base_url,
        model=request.endpoint.model,
        server=request.server,
        harness_version=harness_version(),
        git_sha=git_sha(),
        locust_version=metadata.version("locust"),
        host=host_info(),
        telemetry_interval_s=request.telemetry_interval_s,
        started_at=time.time(),
        counts=RunCounts(planned=len(items)),
        run_tag=run_tag,
    )
    write_manifest(manifest, request.out_dir)

    dispatcher = Dispatcher(items, duration_s=plan.duration_s)
    journal = RunJournal(request.out_dir)
    users = user_count(plan, request.system, request.batch_size, request.max_users)
    _allow_open_files(users)
    client = httpx.Client(
        base_url=request.endpoint.base_url,
        headers=request.headers,
        # The read timeout bounds the wait for a first byte; the users bound later pauses.
        timeout=httpx.Timeout(
            request.timeouts.first_byte_s, connect=min(CONNECT_TIMEOUT_S, request.timeouts.first_byte_s)
        ),
        limits=httpx.Limits(max_connections=users + 8, max_keepalive_connections=users + 8),
    )
    context = DriverContext(
        dispatcher, journal, client, request.endpoint.model, request.spec.endpoint, run_tag, request.timeouts
    )
    step_log = (request.server or {}).get("step_log")
    steps = StepLogCursor(Path(step_log)) if step_log else None
    environment = Environment(user_classes=[make_user_class(context)], host=request.endpoint.base_url)
    runner = environment.create_local_runner()
    if request.ui:
        environment.create_web_ui("127.0.0.1", request.ui_port)
        logger.info(f"Locust web UI at http://127.0.0.1:{request.ui_port}")

    sampler = TelemetrySampler(request.endpoint.base_url, request.telemetry_interval_s, request.headers).start()
    runner.start(users, spawn_rate=max(users, 1) * 100.0)
    if runner.spawning_greenlet is not None:
        runner.spawning_greenlet.join()
    # From the first send on: spawning the users is set-up, not the run.
    monitor = ClientMonitor().start()
    started = dispatcher.open()
    manifest.started_at = started
    logger.info(f"{request.system}: {len(items)} requests, {users} users, B={request.batch_size}")
    reporter = gevent.spawn(_report_progress, dispatcher, context, started)
    # A request that finishes during a long lull must reach the disk too.
    flusher = gevent.spawn(_flush_periodically, journal)
    try:
        dispatcher.finished.wait()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: keep what was measured, mark the run incomplete, then unwind.
        interrupted = True
    else:
        interrupted = False
    ended = time.time()
    reporter.kill()
    flusher.kill()
    runner.quit()
    client.close()
    samples = sampler.stop()
    manifest.client_health = monitor.stop()

    unanswered = _answer_for_the_rest(items, dispatcher, journal, context.worker)
    records_written, _ = journal.finalize()
    pq.write_table(pa.Table.from_pylist(sampler.as_rows(), schema=TELEMETRY_SCHEMA), request.out_dir / TELEMETRY_FILE)
    _write_locust_outputs(environment, request.out_dir)
    records = pq.read_table(request.out_dir / "records.parquet").to_pylist()
    if steps is not None:
        finished = sum(1 for r in records if r["ok"])
        pq.write_table(steps.read_run(run_tag, finished), request.out_dir / STEPS_FILE)
        manifest.engine_steps = True
    failures: dict[str, int] = {}
    for row in records:
        if not row["ok"]:
            failures[row["error_kind"]] = failures.get(row["error_kind"], 0) + 1
    counts = RunCounts(
        planned=len(items),
        not_due=len(dispatcher.not_due),
        sent=context.sent,
        ok=sum(r["ok"] for r in records),
        failed=sum(not r["ok"] for r in records),
        length_mismatch=sum(r["length_mismatch"] for r in records),
        unanswered=unanswered,
        failures=dict(sorted(failures.items())),
    )
    problems = row_problems((r["request_id"] for r in records), counts.planned, counts.not_due)
    manifest.ended_at, manifest.counts, manifest.complete = ended, counts, not interrupted
    write_manifest(manifest, request.out_dir)
    if interrupted:
        logger.info(
            f"interrupted: kept {records_written - unanswered} finished requests in {request.out_dir}"
            " (marked incomplete)"
        )
        raise KeyboardInterrupt
    duration = ended - started
    rate = context.generated_tokens / duration if duration > 0 else 0.0
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.failures.items())
    logger.info(
        f"done: {counts.ok}/{counts.planned - counts.not_due} ok,"
        f" {counts.failed} failed{f' ({kinds})' if kinds else ''},"
        f" {rate:.0f} generated tok/s over {duration:.1f} s, {len(samples)} telemetry samples -> {request.out_dir}"
    )
    return RunOutcome(request.out_dir, counts, duration, rate, problems)


def _answer_for_the_rest(items, dispatcher: Dispatcher, journal: RunJournal, worker: str) -> int:
    """Write a failed row for every owed request no load user recorded; return how many.

    After an interruption these are the requests never sent and those cut off in flight;
    in a run that ended normally, any here means a load user died without its row.
    """
    not_due = set(dispatcher.not_due)
    written = 0
    for item in items:
        if item.request_id in not_due or item.request_id in journal.recorded:
            continue
        if item.request_id in dispatcher.handed_out:
            failure = Failure(LOST, "handed to a load user, which recorded no outcome (interrupted in flight?)")
        else:
            failure = Failure(NOT_SENT, "the run stopped before it was sent")
        journal.add(unanswered_row(item, worker, failure), [])
        written += 1
    return written


def _check_with_server(plan, prompts: list[str], request: RunRequest) -> None:
    """Count a few prompts with the server's own tokenizer: proves ours is the same."""
    counter = server_token_counter(request.endpoint, request.headers)
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


def _report_progress(dispatcher: Dispatcher, context: DriverContext, started: float) -> None:
    while True:
        gevent.sleep(2.0)
        elapsed = time.time() - started
        logger.info(
            f"  {dispatcher.completed}/{dispatcher.total} done, {context.generated_tokens / elapsed:.0f} tok/s,"
            f" {context.failed} errors, {elapsed:.0f} s"
        )


def _write_locust_outputs(environment: Environment, out_dir: Path) -> None:
    """Locust's own stats (CSV) and HTML report, for people used to them."""
    locust_dir = out_dir / "locust"
    locust_dir.mkdir(exist_ok=True)
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    with (locust_dir / "stats.csv").open("w", newline="") as handle:
        stats_csv.requests_csv(csv.writer(handle))
    with (locust_dir / "failures.csv").open("w", newline="") as handle:
        stats_csv.failures_csv(csv.writer(handle))
    (locust_dir / "report.html").write_text(get_html_report(environment, show_download_link=False))
