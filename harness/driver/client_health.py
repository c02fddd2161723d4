"""How the load client itself fared during a run: its CPU share and its event-loop lag.

A client that is short of CPU sends late and timestamps late, so its figures are
the client's, not the server's. Both numbers go into the manifest; the analysis
turns them into the run's health verdict.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import gevent
import numpy as np
import psutil

from harness.manifest import ClientHealth

LAG_PROBE_INTERVAL_S = 0.05


class ClientMonitor:
    """Measures this process's CPU time and how late a 50 ms gevent timer fires."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._lags: list[float] = []
        self._greenlet: gevent.Greenlet | None = None
        self._cpu0 = 0.0
        self._wall0 = 0.0

    def start(self) -> ClientMonitor:
        times = self._process.cpu_times()
        self._cpu0, self._wall0 = times.user + times.system, time.monotonic()
        self._greenlet = gevent.spawn(self._probe)
        return self

    def stop(self) -> ClientHealth:
        """Stop probing; the client's CPU share (of one core) and loop lag since start()."""
        if self._greenlet is not None:
            self._greenlet.kill()
        times = self._process.cpu_times()
        wall = max(time.monotonic() - self._wall0, 1e-9)
        lags = np.array(self._lags) if self._lags else np.zeros(1)
        return ClientHealth(
            cpu_share=round((times.user + times.system - self._cpu0) / wall, 4),
            loop_lag_p50_s=float(np.percentile(lags, 50)),
            loop_lag_p99_s=float(np.percentile(lags, 99)),
            loop_lag_max_s=float(lags.max()),
            loop_lag_probes=len(self._lags),
        )

    def _probe(self) -> None:
        while True:
            due = time.monotonic() + LAG_PROBE_INTERVAL_S
            gevent.sleep(LAG_PROBE_INTERVAL_S)
            self._lags.append(max(0.0, time.monotonic() - due))


def worst_case(healths: Sequence[ClientHealth]) -> ClientHealth:
    """One health for several load processes: each figure the worst any of them measured.

    So the health checks of a single-process run apply unchanged: a run is client-bound
    when any one of its processes was. Probes are the total taken.
    """
    if not healths:
        raise ValueError("no client health to combine")
    worst = {name: _worst(getattr(health, name) for health in healths) for name in ClientHealth.model_fields}
    worst["loop_lag_probes"] = sum(health.loop_lag_probes for health in healths)
    return ClientHealth.model_validate(worst)


def _worst(values: Iterable[float | None]) -> float | None:
    """The largest figure measured; None only when no process measured it."""
    measured = [value for value in values if value is not None]
    return max(measured) if measured else None
