"""Hands work items to load users at the planned times (runs inside gevent).

Open loop: each item is sent at `start + arrival_s`, whoever picks it up. Closed loop:
items go out as users free up. Naive waves: a wave's items go out together, and the
next wave only once every request of the previous one has finished. Client-static waves
(FORMED_WAVE) are formed as they go, by the static engine's rule (WaveRule): once the
previous wave has finished, the next forms when B requests have arrived or the oldest
has waited the batch wait, and holds those that have arrived by then, up to B. A conversation's
later turn (`after` set) is due at its previous turn's end plus its think time, not at
its own arrival: the answer's time is the server's under test, the think time the user's.

A run's duration ends only a closed loop (whose plan is a pool larger than the run
needs): the items it did not reach are `not_due`, and say so. A scheduled item is
always sent, however late: dropping it would lose a planned request.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Protocol

import gevent
from gevent.event import Event

from harness.driver.work import FORMED_WAVE, NO_TURN, NO_WAVE, WorkItem

# Arrivals this close to a wave's forming instant are in it (float sums of offsets).
_ARRIVAL_TOLERANCE_S = 1e-6


@dataclass(frozen=True)
class WaveRule:
    """How client-static forms its waves: B, and how long the oldest arrival waits for a full one."""

    batch_size: int
    batch_wait_s: float


class WorkSource(Protocol):
    """Where a run's load users take their work: a Dispatcher, or a distributed worker's
    proxy of the master's (harness.driver.distributed.remote)."""

    total: int
    completed: int
    start_s: float | None
    handed_out: set[int]
    not_due: list[int]
    finished: Event

    def open(self, at: float | None = None) -> float: ...

    def next_item(self) -> WorkItem | None: ...

    def scheduled_s(self, item: WorkItem) -> float | None: ...

    def wait_for_schedule(self, item: WorkItem) -> None: ...

    def done(self, item: WorkItem) -> None: ...


class Dispatcher:
    """Shared by every user of one run; all methods are called from greenlets.

    `clock` (seconds) and `sleep` are the run's time: by default the wall clock, which the
    request records share, and gevent's sleep. Tests pass a simulated pair.
    """

    def __init__(
        self,
        items: Sequence[WorkItem],
        duration_s: float | None = None,
        *,
        rule: WaveRule | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = gevent.sleep,
    ) -> None:
        """`rule` forms the waves of FORMED_WAVE items (required when there are any)."""
        if rule is None and any(item.wave == FORMED_WAVE for item in items):
            raise ValueError("items of formed waves need a WaveRule")
        self._rule = rule
        self._clock = clock
        self._sleep = sleep
        self._pending = deque(items)
        self.total = len(items)
        self.duration_s = duration_s
        self.start_s: float | None = None
        self._opened = Event()
        self.finished = Event()
        self._in_flight = 0
        self._wave_in_flight: dict[int, int] = {}
        self._wave_done = Event()
        self._wave_done.set()
        # When each wave could go out (its predecessor done): a trace's wave is due at the later
        # of that and its last member's arrival, so its lateness is the client's alone.
        self._wave_opened: dict[int, float] = {}
        # Client-static: the waves formed so far, the members of the newest not yet handed
        # out, and whether one user is forming the next (the others wait on `_formed`).
        self._waves_formed = 0
        self._to_hand_out = 0
        self._forming = False
        self._formed = Event()
        # Each turn that another waits for, by request_id: set when it ends, and when that was.
        self._answered: dict[int, Event] = {item.after: Event() for item in items if item.after != NO_TURN}
        self._ended_s: dict[int, float] = {}
        self.handed_out: set[int] = set()
        self.completed = 0
        # Closed-loop items the duration made unnecessary, by request_id.
        self.not_due: list[int] = []
        if not items:
            self.finished.set()

    def open(self, at: float | None = None) -> float:
        """Start the run clock (now, or at instant `at` of the clock); users waiting in `next_item` begin.

        A worker of a distributed run opens at the run's common start instant, so every
        worker's schedule counts from the same t0 (items are handed out at once and sent
        when due; a closed loop's items are handed out by the master, which opens at t0).
        """
        self.start_s = self._clock() if at is None else at
        self._opened.set()
        return self.start_s

    def next_item(self) -> WorkItem | None:
        """The next item to send (blocking until its wave may start), or None when done."""
        self._opened.wait()
        while True:
            if self._pending and self._past_duration() and self._pending[0].arrival_s is None:
                self.not_due += [pending.request_id for pending in self._pending]
                self._pending.clear()
            if not self._pending:
                self._check_finished()
                return None
            item = self._pending[0]
            if item.wave == FORMED_WAVE:
                if self._to_hand_out == 0:
                    self._form_wave()
                    continue
                self._to_hand_out -= 1
                item = replace(item, wave=self._waves_formed - 1)
                self._pending[0] = item
            if item.wave != NO_WAVE and item.wave not in self._wave_in_flight and not self._wave_done.is_set():
                # The previous wave is still generating: a padded batch cannot take new rows.
                self._wave_done.wait()
                continue
            self._pending.popleft()
            if item.wave != NO_WAVE:
                self._wave_done.clear()
                self._wave_in_flight[item.wave] = self._wave_in_flight.get(item.wave, 0) + 1
                self._wave_opened.setdefault(item.wave, self._clock())
            self._in_flight += 1
            self.handed_out.add(item.request_id)
            return item

    def _form_wave(self) -> None:
        """Form the next client-static wave (one user does; the others wait): once the previous
        wave has ended, wait for B arrivals or the oldest's batch wait, then count who came."""
        if self._forming:
            self._formed.wait()
            return
        if not self._wave_done.is_set():
            self._wave_done.wait()
            return
        assert self._rule is not None and self.start_s is not None
        self._forming = True
        self._formed.clear()
        try:
            candidates = list(islice(self._pending, self._rule.batch_size))
            due = [self.start_s + (item.arrival_s or 0.0) for item in candidates]
            full = due[-1] if len(candidates) == self._rule.batch_size else float("inf")
            forms_at = max(self._clock(), min(full, due[0] + self._rule.batch_wait_s))
            self._sleep(max(0.0, forms_at - self._clock()))
            self._wave_opened[self._waves_formed] = forms_at
            self._to_hand_out = sum(at <= forms_at + _ARRIVAL_TOLERANCE_S for at in due)
            self._waves_formed += 1
        finally:
            self._forming = False
            self._formed.set()

    def scheduled_s(self, item: WorkItem) -> float | None:
        """Absolute send time the plan asks for (None in a closed loop, for waves but on a trace, and for a
        later turn whose previous turn has not ended yet)."""
        if item.after != NO_TURN:
            ended = self._ended_s.get(item.after)
            return None if ended is None else ended + item.think_s
        if item.arrival_s is None:
            return None
        assert self.start_s is not None, "scheduled_s before open()"
        due = self.start_s + item.arrival_s
        return max(due, self._wave_opened[item.wave]) if item.wave in self._wave_opened else due

    def wait_for_schedule(self, item: WorkItem) -> None:
        """Sleep until the item's planned send time (no-op if it is due or unscheduled); a later turn
        first waits for its previous turn to end."""
        if item.after != NO_TURN:
            self._answered[item.after].wait()
        due = self.scheduled_s(item)
        if due is not None:
            self._sleep(max(0.0, due - self._clock()))

    def done(self, item: WorkItem) -> None:
        """Mark an item finished (whatever its outcome)."""
        self._in_flight -= 1
        self.completed += 1
        if item.request_id in self._answered:
            # Failed or not, the turn has ended: the next one's user reads what it got and thinks.
            self._ended_s[item.request_id] = self._clock()
            self._answered[item.request_id].set()
        if item.wave != NO_WAVE:
            self._wave_in_flight[item.wave] -= 1
            if self._wave_in_flight[item.wave] == 0:
                del self._wave_in_flight[item.wave]
                self._wave_done.set()
        self._check_finished()

    def _past_duration(self) -> bool:
        if self.duration_s is None:
            return False
        assert self.start_s is not None, "next_item waits for open()"
        return self._clock() - self.start_s >= self.duration_s

    def _check_finished(self) -> None:
        if not self._pending and self._in_flight == 0:
            self.finished.set()
