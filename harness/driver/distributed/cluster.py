"""The master of a distributed run (`--workers N`): Locust's MasterRunner, its workers, their rows.

The master does what a single process does before the load (plan, prompts, warm-up, the
run directory) and after it (tables, manifest), polls the server's /metrics, and leaves
the requests to N worker processes (harness.driver.distributed.worker): started here on loopback, or
attached from other machines (`--master-bind`, then `batchbench worker --master`). Each
worker gets its share of the plan (harness.driver.distributed.shard), Locust spawns the users across
them, and every worker opens its schedule at one start instant t0 of the master's clock.
Each worker's rows arrive as its journal flushes and are appended to journals of their own
here (`records-w<k>.jsonl`), merged at the end into the tables a single process writes.
Runs inside a gevent-patched process.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import numpy as np
from gevent.event import Event
from locust.env import Environment
from locust.runners import MasterRunner

import harness
from harness.driver.client_health import ClientMonitor, worst_case
from harness.driver.dispatch import Dispatcher
from harness.driver.distributed import wire
from harness.driver.distributed.remote import ItemDesk
from harness.driver.distributed.shard import ClusterSpec, Shard, shard_work
from harness.driver.distributed.wire import Brief, Done, Ready, item_to_wire
from harness.driver.journal import RunJournal, append_lines
from harness.driver.tables import StoppedLoad
from harness.driver.user import make_user_class
from harness.driver.work import WorkItem
from harness.errors import BatchBenchError, UsageError
from harness.rundir.journal import JournalFiles
from harness.rundir.manifest import ClientHealth, LoadProcess
from harness.settings import Settings
from harness.telemetry.metrics import TelemetrySample, TelemetrySampler

logger = logging.getLogger(__name__)

# Local workers import in seconds; remote ones need someone to start them.
ATTACH_TIMEOUT_S = 300.0
SETUP_TIMEOUT_S = 60.0
# t0 lies this far after wire.START leaves: every worker has it before its first request is due.
START_LEAD_S = 0.5
# After Ctrl-C: how long the workers get to stop their users and send their last rows.
STOP_GRACE_S = 15.0
PROJECT_ROOT = Path(harness.__file__).resolve().parent.parent


class ClusterError(BatchBenchError):
    """The workers did not attach, set up or answer in time."""


@dataclass
class _Member:
    """One worker of the run, as the master knows it."""

    client_id: str
    shard: Shard
    files: JournalFiles
    ready: Ready | None = None
    done: Done | None = None
    dead: bool = False
    rows: int = 0
    lateness: list[float] = field(default_factory=list)


class Cluster:
    """The master's side of one distributed run; a context manager that stops everything it started."""

    def __init__(self, spec: ClusterSpec, base_url: str) -> None:
        self.spec = spec
        self.environment = Environment(user_classes=[make_user_class()], host=base_url)
        self.runner: MasterRunner | None = None
        self.address = ""
        self._processes: list[subprocess.Popen[bytes]] = []
        self._members: dict[str, _Member] = {}
        self._settled = Event()
        self._all_done = Event()
        self._desk: ItemDesk | None = None
        self._journal: RunJournal | None = None
        self._greenlets: list[gevent.Greenlet] = []
        self._sampler: TelemetrySampler | None = None
        self._monitor: ClientMonitor | None = None
        self._closed = False
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.started_s: float | None = None
        self.total = 0
        self.completed = 0
        self.generated_tokens = 0
        self.failed = 0
        self.recorded: set[int] = set()
        self.health: ClientHealth | None = None
        self.master_health: ClientHealth | None = None
        self.samples: list[TelemetrySample] = []

    def open(self) -> None:
        """Listen for workers and start the local ones; return once all attached."""
        host, port = self.spec.bind or ("127.0.0.1", 0)
        try:
            self.runner = self.environment.create_master_runner(host, port)
        except SystemExit as exc:  # Locust logs a busy port and exits
            raise UsageError(f"--master-bind {host}:{port}: cannot listen there (port busy?)") from exc
        self.address = f"{host}:{self.runner.server.port}"
        handlers = {wire.PING: self._on_ping, wire.READY: self._on_ready, wire.ROWS: self._on_rows,
                    wire.FINISHED: self._on_finished, wire.DONE: self._on_done}
        for kind, handler in handlers.items():
            self.runner.register_message(kind, lambda environment, msg, handler=handler: handler(msg.node_id, msg.data))
        self.runner.register_message(wire.NEXT, lambda environment, msg: self._on_next(msg.node_id, msg.data),
                                     concurrent=True)
        if self.spec.bind is None:
            self._start_local_workers()
        else:
            logger.info(f"waiting for {self.spec.workers} workers: on each, run `batchbench worker --master"
                        f" {self.address}`")
        self._attach()

    def _start_local_workers(self) -> None:
        settings = Settings.from_env()
        path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), settings.pythonpath]))
        command = [sys.executable, "-m", "harness.cli", "worker", "--master", self.address]
        for _ in range(self.spec.workers):
            # A session of its own: Ctrl-C reaches the master, which stops its workers in order.
            self._processes.append(subprocess.Popen(command, env={**settings.environ, "PYTHONPATH": path},
                                                    stdout=subprocess.DEVNULL, start_new_session=True))

    def _attach(self) -> None:
        assert self.runner is not None
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while len(self.runner.clients.ready) < self.spec.workers:
            exited = [process.returncode for process in self._processes if process.poll() is not None]
            if exited:
                raise ClusterError(f"a worker process exited (code {exited[0]}) before attaching to {self.address}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{len(self.runner.clients.ready)} of {self.spec.workers} workers attached to"
                                   f" {self.address} in {ATTACH_TIMEOUT_S:g} s")
            gevent.sleep(0.05)
        logger.info(f"{self.spec.workers} workers attached to {self.address}")

    def start(self, template: Brief, items: list[WorkItem], duration_s: float | None, run_dir: Path,
              sampler: TelemetrySampler, ui_port: int | None) -> float:
        """Hand out the shares, spawn the users, start the clock at t0; returns t0 (the master's clock)."""
        assert self.runner is not None, "open() first"
        attached = sorted((node.id for node in self.runner.clients.ready), key=self.runner.get_worker_index)
        for surplus in attached[self.spec.workers:]:
            # Locust would give it users too, with no share to send: it is sent away before spawning.
            logger.info(f"a worker beyond --workers {self.spec.workers} attached: sent away")
            self.runner.send_message("quit", client_id=surplus)
            del self.runner.clients[surplus]
        shards = shard_work(items, self.spec.workers)
        self.total = len(items)
        self._journal = RunJournal(run_dir)
        for client_id, shard in zip(attached, shards, strict=False):
            files = JournalFiles.of_worker(run_dir, shard.worker)
            self._members[client_id] = _Member(client_id, shard, files)
        if shards[0].central:
            self._desk = ItemDesk(Dispatcher(items, duration_s), self._answer)
        for member in self._members.values():
            brief = template.model_copy(update={"index": member.shard.worker, "central": member.shard.central,
                                                "items": [item_to_wire(item) for item in member.shard.items]})
            self.runner.send_message(wire.ASSIGN, brief.model_dump(), client_id=member.client_id)
        self._wait_for(self._settled, "set up")
        if ui_port is not None:
            self.environment.create_web_ui("127.0.0.1", ui_port)
        self._sampler = sampler
        sampler.start()
        self.runner.start(template.users, spawn_rate=template.users * 100.0)
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while self.runner.user_count < template.users:
            if time.monotonic() > deadline:
                raise ClusterError(f"workers spawned {self.runner.user_count} of {template.users} users")
            gevent.sleep(0.05)
        t0 = self.started_s = time.time() + START_LEAD_S
        self.runner.send_message(wire.START, {"t0": t0})
        self._monitor = ClientMonitor()
        self._greenlets.append(gevent.spawn_later(START_LEAD_S, self._open, t0))
        return t0

    def _open(self, t0: float) -> None:
        """At t0: the master's monitor starts, and a central run's queue opens."""
        assert self._monitor is not None
        self._monitor.start()
        if self._desk is not None:
            self._desk.dispatcher.open(t0)

    def _wait_for(self, event: Event, what: str) -> None:
        if not event.wait(timeout=SETUP_TIMEOUT_S):
            raise ClusterError(f"the workers did not {what} within {SETUP_TIMEOUT_S:g} s")

    def spawn(self, function: Any, *args: Any) -> None:
        """Run `function(*args)` in a greenlet that close() kills."""
        self._greenlets.append(gevent.spawn(function, *args))

    def _on_ping(self, client_id: str, data: dict[str, Any]) -> None:
        assert self.runner is not None
        self.runner.send_message(wire.PONG, {"master_s": time.time()}, client_id=client_id)

    def _on_ready(self, client_id: str, data: dict[str, Any]) -> None:
        self._members[client_id].ready = Ready.model_validate(data)
        if all(member.ready is not None for member in self._members.values()):
            self._settled.set()

    def _on_rows(self, client_id: str, data: dict[str, Any]) -> None:
        member = self._members[client_id]
        append_lines(member.files, data["records"], data["tokens"])
        for line in data["records"]:
            row = json.loads(line)
            self.recorded.add(row["request_id"])
            self.completed += 1
            self.generated_tokens += row["completion_tokens"]
            self.failed += not row["ok"]
            member.rows += 1
            if math.isfinite(row["lateness_s"]):
                member.lateness.append(row["lateness_s"])

    def _on_next(self, client_id: str, data: dict[str, Any]) -> None:
        assert self._desk is not None, "NEXT comes only in a central run"
        self._desk.ask(client_id, data["ticket"])

    def _answer(self, client_id: str, ticket: int, item: WorkItem | None) -> None:
        assert self.runner is not None
        data = None if item is None else item_to_wire(item)
        self.runner.send_message(wire.ITEM, {"ticket": ticket, "item": data}, client_id=client_id)

    def _on_finished(self, client_id: str, data: dict[str, Any]) -> None:
        assert self._desk is not None, "FINISHED comes only in a central run"
        self._desk.finished(client_id, data["request_id"])

    def _on_done(self, client_id: str, data: dict[str, Any]) -> None:
        self._members[client_id].done = Done.model_validate(data)
        self._settle(client_id)

    def _settle(self, client_id: str) -> None:
        """A worker is done or dead: what it held is no longer in flight."""
        if self._desk is not None:
            self._desk.release(client_id)
        if all(member.done is not None or member.dead for member in self._members.values()):
            self._all_done.set()

    def wait(self) -> bool:
        """Wait until every worker is done (or dead); True if Ctrl-C or SIGTERM came first."""
        try:
            while not self._all_done.wait(timeout=1.0):
                self._bury_the_dead()
        except KeyboardInterrupt:
            self._stop_workers()
            return True
        return False

    def _bury_the_dead(self) -> None:
        """Settle workers that ended without a DONE: dropped by Locust, or their local process exited."""
        assert self.runner is not None
        exited = {str(process.pid) for process in self._processes if process.poll() is not None}
        for member in self._members.values():
            if member.done is not None or member.dead:
                continue
            pid = member.ready.name.rsplit(":", 1)[-1] if member.ready else ""
            if member.client_id not in self.runner.clients or pid in exited:
                logger.info(f"worker {member.shard.worker} stopped without finishing its share")
                member.dead = True
                self._settle(member.client_id)

    def _stop_workers(self) -> None:
        assert self.runner is not None
        for member in self._members.values():
            if member.done is None and not member.dead:
                self.runner.send_message(wire.STOP, {}, client_id=member.client_id)
        if not self._all_done.wait(timeout=STOP_GRACE_S):
            for member in self._members.values():
                member.dead = member.done is None

    def close(self) -> None:
        """Stop everything started, each once: greenlets, Locust's master (it tells the workers to quit),
        the telemetry, the monitor, then any local worker process still running."""
        if self._closed:
            return
        self._closed = True
        for greenlet in self._greenlets:
            greenlet.kill()
        try:
            if self.runner is not None:
                self.runner.quit()
            if self._sampler is not None:
                self.samples = self._sampler.stop()
            if self._monitor is not None:
                self.master_health = self._monitor.stop()
        finally:
            for process in self._processes:
                _end(process)
        healths = [self.master_health] + [member.done.health for member in self._members.values() if member.done]
        present = [health for health in healths if health is not None]
        self.health = worst_case(present) if present else None

    def processes(self) -> list[LoadProcess]:
        """The master and each worker, for the manifest."""
        entries = [LoadProcess(role="master", name=self.name, requests=0, clock_offset_s=0.0, round_trip_s=0.0,
                               lateness_p99_s=None, client_health=self.master_health)]
        for member in sorted(self._members.values(), key=lambda member: member.shard.worker):
            entries.append(LoadProcess(
                role="worker",
                name=member.ready.name if member.ready else member.client_id,
                requests=member.rows,
                clock_offset_s=member.ready.clock_offset_s if member.ready else 0.0,
                round_trip_s=member.ready.round_trip_s if member.ready else 0.0,
                lateness_p99_s=float(np.percentile(member.lateness, 99)) if member.lateness else None,
                client_health=member.done.health if member.done else None,
            ))
        return entries

    def stopped(self) -> StoppedLoad:
        """What the run's tables need, once close() has run."""
        assert self._journal is not None, "start() ran"
        handed_out: set[int] = set(self._desk.dispatcher.handed_out) if self._desk is not None else set()
        sent = 0
        for member in self._members.values():
            if member.done is not None:
                handed_out.update(member.done.handed_out)
                sent += member.done.sent
            else:
                # Whatever it took is unknown: its unrecorded share counts as lost, not as never sent.
                handed_out.update(item.request_id for item in member.shard.items)
                sent += member.rows
        return StoppedLoad(
            journal=self._journal,
            recorded=self.recorded,
            handed_out=handed_out,
            not_due=self._desk.dispatcher.not_due if self._desk is not None else [],
            sent=sent,
            worker=self.name,
            samples=self.samples,
            environment=self.environment,
            sources=tuple(member.files for member in self._members.values()),
        )

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _end(process: subprocess.Popen[bytes]) -> None:
    """Let a local worker exit on the master's quit; terminate it, then kill it, if it lingers."""
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
