"""One worker process of a distributed run (`batchbench worker --master HOST[:PORT]`).

It attaches to the master as a Locust worker (locust.runners.WorkerRunner), takes its
share of the run (`wire.ASSIGN`), lets Locust spawn its users, opens its dispatcher at the
run's common start instant, and sends its rows to the master as its journal flushes. Its
records and token times are the same rows a single process writes (harness.driver.user);
on another machine they are shifted into the master's clock first. Runs inside a
gevent-patched process.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import gevent
from gevent.event import AsyncResult, Event
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import WorkerRunner

from harness.driver.client_health import ClientMonitor, unmeasured
from harness.driver.dispatch import Dispatcher
from harness.driver.distributed import wire
from harness.driver.distributed.clock import EXCHANGES, ClockOffset, Exchange, estimate_offset
from harness.driver.distributed.remote import RemoteDispatcher
from harness.driver.distributed.wire import Brief, Done, Ready, is_loopback, item_from_wire
from harness.driver.http_client import allow_open_files, load_client
from harness.driver.journal import RunJournal, Sink
from harness.driver.timeouts import Timeouts
from harness.driver.user import DriverContext, StreamingUser, make_user_class
from harness.errors import UsageError

logger = logging.getLogger(__name__)
# Locust's own lines (connection retries, "quit") are not the harness's progress.
logging.getLogger("locust").setLevel(logging.ERROR)

# The record columns that hold a time (harness.rundir.records.RECORD_FIELDS).
RECORD_TIMES = ("scheduled_s", "sent_s", "first_token_s", "end_s")


def wait_for_master(
    host: str,
    port: int,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = gevent.sleep,
) -> None:
    """Return once something listens at host:port; UsageError after `timeout_s` of refusals.

    `clock` (monotonic seconds) and `sleep` pace the retries; tests pass a simulated pair.
    """
    deadline = clock() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=min(5.0, timeout_s)).close()
            return
        except OSError as exc:
            if clock() >= deadline:
                raise UsageError(f"--master {host}:{port}: no master answered within {timeout_s:g} s ({exc})") from exc
            sleep(0.5)


class Worker:
    """A worker's part of one run, driven by the master's messages."""

    def __init__(self, runner: WorkerRunner, user_class: type[StreamingUser], same_clock: bool) -> None:
        self.runner = runner
        self.user_class = user_class
        self.same_clock = same_clock
        self.context: DriverContext | None = None
        self.offset = ClockOffset(0.0, 0.0)
        self.monitor: ClientMonitor | None = None
        self.reported = Event()
        self._pong: AsyncResult | None = None
        self._greenlets: list[gevent.Greenlet] = []
        for kind, handler in ((wire.ASSIGN, self._on_assign), (wire.PONG, self._on_pong), (wire.START, self._on_start),
                              (wire.ITEM, self._on_item), (wire.STOP, self._on_stop)):
            runner.register_message(kind, lambda environment, msg, handler=handler: handler(msg.data))

    def _send(self, kind: str, data: dict[str, Any]) -> None:
        self.runner.send_message(kind, data)

    def _on_assign(self, data: dict[str, Any]) -> None:
        # A handler must not block the message loop: the clock exchange waits for answers.
        self._greenlets.append(gevent.spawn(self._set_up, Brief.model_validate(data)))

    def _set_up(self, brief: Brief) -> None:
        timeouts = Timeouts(brief.first_byte_timeout_s, brief.stall_timeout_s)
        allow_open_files(brief.users)
        dispatcher = RemoteDispatcher(self._send) if brief.central else Dispatcher(
            [item_from_wire(item) for item in brief.items]
        )
        if not self.same_clock:
            self.offset = estimate_offset([self._exchange() for _ in range(EXCHANGES)])
        journal = RunJournal(None, sink=self._send_rows) if self.offset.offset_s == 0 else ShiftedJournal(
            self.offset.offset_s, self._send_rows)
        self.context = DriverContext(
            dispatcher,
            journal,
            load_client(brief.base_url, brief.headers, timeouts, brief.users),
            brief.model,
            brief.endpoint,
            brief.run_tag,
            timeouts,
        )
        self.user_class.context_ = self.context
        self._send(wire.READY, Ready(name=self.context.worker, clock_offset_s=self.offset.offset_s,
                                round_trip_s=self.offset.round_trip_s).model_dump())

    def _exchange(self) -> Exchange:
        self._pong = AsyncResult()
        asked = time.time()
        self._send(wire.PING, {})
        master_s = self._pong.get(timeout=30)
        assert master_s is not None, "a pong carries the master's time"
        return Exchange(asked, master_s, time.time())

    def _on_pong(self, data: dict[str, Any]) -> None:
        assert self._pong is not None, "a pong answers a ping"
        self._pong.set(data["master_s"])

    def _send_rows(self, records: list[str], tokens: list[str]) -> None:
        self._send(wire.ROWS, {"records": records, "tokens": tokens})

    def _on_start(self, data: dict[str, Any]) -> None:
        assert self.context is not None, "START follows ASSIGN"
        # The master's t0 on this worker's clock: every worker's schedule counts from it.
        t0 = data["t0"] + self.offset.offset_s
        self.context.dispatcher.open(at=t0)
        # Measured from t0 on, as a single process measures from its first send.
        self.monitor = ClientMonitor()
        self._greenlets.append(gevent.spawn_later(max(0.0, t0 - time.time()), self.monitor.start))
        self._greenlets.append(gevent.spawn(self._flush_periodically, self.context.journal))
        self._greenlets.append(gevent.spawn(self._finish_when_done))

    def _on_item(self, data: dict[str, Any]) -> None:
        assert self.context is not None and isinstance(self.context.dispatcher, RemoteDispatcher)
        item = None if data["item"] is None else item_from_wire(data["item"])
        self.context.dispatcher.answer(data["ticket"], item)

    def _on_stop(self, data: dict[str, Any]) -> None:
        self._greenlets.append(gevent.spawn(self.stop))

    def _finish_when_done(self) -> None:
        assert self.context is not None
        self.context.dispatcher.finished.wait()
        # A user records its row right after marking its item done: wait for every user to end.
        self.runner.user_greenlets.join()
        self._report(interrupted=False)

    def stop(self) -> None:
        """Stop the users now (Ctrl-C, or the master's STOP), then report what was done."""
        if self.reported.is_set():
            return
        self.runner.stop_users(self.runner.user_classes_count)
        self._report(interrupted=True)

    def _report(self, interrupted: bool) -> None:
        if self.reported.is_set() or self.context is None:
            return
        self.reported.set()
        self.context.journal.flush()
        health = self.monitor.stop() if self.monitor is not None else unmeasured()
        done = Done(name=self.context.worker, sent=self.context.sent, handed_out=sorted(
            self.context.dispatcher.handed_out), health=health, interrupted=interrupted)
        self._send(wire.DONE, done.model_dump(mode="json"))

    @staticmethod
    def _flush_periodically(journal: RunJournal) -> None:
        while True:
            gevent.sleep(journal.flush_interval_s)
            journal.flush()

    def close(self) -> None:
        """Stop this worker's greenlets and close its HTTP client."""
        for greenlet in self._greenlets:
            greenlet.kill()
        if self.context is not None:
            self.context.client.close()


class ShiftedJournal(RunJournal):
    """A remote worker's journal: each row moved from the worker's clock into the master's before it leaves."""

    def __init__(self, offset_s: float, sink: Sink) -> None:
        super().__init__(None, sink=sink)
        self.offset_s = offset_s

    def add(self, record: dict[str, Any], token_times: list[float]) -> None:
        super().add(*shift_times(self.offset_s, record, token_times))


def shift_times(
    offset_s: float, record: dict[str, Any], token_times: list[float]
) -> tuple[dict[str, Any], list[float]]:
    """One request's row and token times, moved back by `offset_s` (a worker's clock into the master's)."""
    shifted = {**record, **{name: record[name] - offset_s for name in RECORD_TIMES}}
    return shifted, [t - offset_s for t in token_times]


def serve(host: str, port: int, connect_timeout_s: float) -> int:
    """Serve one run as a worker of the master at host:port; the exit code (0, or 130 if interrupted)."""
    wait_for_master(host, port, connect_timeout_s)
    user_class = make_user_class()
    environment = Environment(user_classes=[user_class])
    runner = environment.create_worker_runner(host, port)
    worker = Worker(runner, user_class, same_clock=is_loopback(host))
    logger.info(f"worker {socket.gethostname()} attached to {host}:{port}")
    try:
        runner.greenlet.join()
    except KeyboardInterrupt:
        worker.stop()
        # Let the report leave before the socket closes.
        runner.client.send(Message("quit", None, runner.client_id))
        gevent.sleep(0.2)
        return 130
    finally:
        worker.close()
    return 0
