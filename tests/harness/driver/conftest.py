"""Simulated time for the driver's greenlets: timing tests that no CPU contention can fail."""

from __future__ import annotations

import heapq
import itertools

import gevent
import pytest
from gevent.event import Event


class SimulatedTime:
    """A clock and a gevent sleep on simulated seconds.

    `sleep(d)` parks the calling greenlet; `run_until` lets every greenlet run until all
    are blocked, then moves the clock straight to the earliest wake-up. So the order and
    the instants of events are exact, however slowly the machine runs them.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, Event]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        wake = Event()
        heapq.heappush(self._sleepers, (self.now + max(0.0, seconds), next(self._order), wake))
        wake.wait()

    def run_until(self, done: Event, max_wakeups: int = 100_000) -> bool:
        """Advance until `done` is set; False if every greenlet blocks on something else first."""
        for _ in range(max_wakeups):
            # Returns once the hub has nothing else to run: every greenlet is blocked.
            gevent.idle()
            if done.is_set():
                return True
            if not self._sleepers:
                return False
            self.now, _, wake = heapq.heappop(self._sleepers)
            wake.set()
        return False


@pytest.fixture
def simulated_time() -> SimulatedTime:
    return SimulatedTime()
