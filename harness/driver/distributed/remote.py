"""A closed loop or naive waves across processes: one queue at the master, items asked for one by one.

The master keeps the run's one Dispatcher (harness.driver.dispatch), so the plan's order,
a closed loop's duration and the naive wave barrier hold across every worker exactly as
in one process. `ItemDesk` is its master side; `RemoteDispatcher` stands in for it in each
worker, for that worker's users. Each item costs one message round trip before it is
sent: in a closed loop that is added to the gap between one request's end and the next.
Runs inside gevent.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from gevent.event import AsyncResult, Event

from harness.driver.dispatch import Dispatcher
from harness.driver.distributed.wire import FINISHED, NEXT
from harness.driver.work import WorkItem

# Sends one message to the master: (type, data).
SendToMaster = Callable[[str, dict[str, Any]], None]
# Answers a worker's ticket: (worker's client id, ticket, item or None when there are no more).
Answer = Callable[[str, int, WorkItem | None], None]


class RemoteDispatcher:
    """A worker's stand-in for the master's Dispatcher (the `WorkSource` its users take work from)."""

    def __init__(self, send: SendToMaster) -> None:
        self._send = send
        self._tickets = itertools.count()
        self._waiting: dict[int, AsyncResult] = {}
        self._opened = Event()
        self._in_flight = 0
        self._exhausted = False
        # The master counts the plan: this worker knows only what it took.
        self.total = 0
        self.completed = 0
        self.start_s: float | None = None
        self.handed_out: set[int] = set()
        self.not_due: list[int] = []
        self.finished = Event()

    def open(self, at: float | None = None) -> float:
        """Start the run clock (items come only once the master has opened its own)."""
        self.start_s = time.time() if at is None else at
        self._opened.set()
        return self.start_s

    def next_item(self) -> WorkItem | None:
        """Ask the master for the next item; None once it has no more."""
        self._opened.wait()
        if self._exhausted:
            self._check_finished()
            return None
        ticket = next(self._tickets)
        answer = self._waiting[ticket] = AsyncResult()
        self._send(NEXT, {"ticket": ticket})
        try:
            item = answer.get()
        finally:
            del self._waiting[ticket]
        if item is None:
            self._exhausted = True
            self._check_finished()
            return None
        self._in_flight += 1
        self.handed_out.add(item.request_id)
        return item

    def answer(self, ticket: int, item: WorkItem | None) -> None:
        """The master's answer to a ticket (called from the worker's message handler)."""
        self._waiting[ticket].set(item)

    def scheduled_s(self, item: WorkItem) -> float | None:
        """None: a closed loop's and a wave's items have no planned time; they go when handed out."""
        return None

    def wait_for_schedule(self, item: WorkItem) -> None:
        """Nothing to wait for (see scheduled_s)."""

    def done(self, item: WorkItem) -> None:
        """Mark an item finished, here and at the master (a wave or a closed loop waits on it)."""
        self._in_flight -= 1
        self.completed += 1
        self._send(FINISHED, {"request_id": item.request_id})
        self._check_finished()

    def _check_finished(self) -> None:
        if self._exhausted and self._in_flight == 0 and not self._waiting:
            self.finished.set()


class ItemDesk:
    """The master's side: hands the run's items to workers' users in plan order, one per ask."""

    def __init__(self, dispatcher: Dispatcher, answer: Answer) -> None:
        self.dispatcher = dispatcher
        self._answer = answer
        # Per worker: items handed out and not yet finished.
        self._out: dict[str, dict[int, WorkItem]] = {}

    def ask(self, worker: str, ticket: int) -> None:
        """A user of `worker` wants an item: wait for the dispatcher's next (a wave may hold it), answer."""
        item = self.dispatcher.next_item()
        if item is not None:
            self._out.setdefault(worker, {})[item.request_id] = item
        self._answer(worker, ticket, item)

    def finished(self, worker: str, request_id: int) -> None:
        """A worker's user finished an item, whatever its outcome."""
        item = self._out.get(worker, {}).pop(request_id, None)
        if item is not None:
            self.dispatcher.done(item)

    def release(self, worker: str) -> list[int]:
        """A worker stopped or died: its unfinished items count as finished (their rows are answered
        for at the end); returns their ids."""
        items = self._out.pop(worker, {})
        for item in items.values():
            self.dispatcher.done(item)
        return sorted(items)
