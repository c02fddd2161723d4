"""How the load client itself fared during a run: its CPU share and its event-loop lag.

A client that is short of CPU sends late and timestamps late, so its figures are
the client's, not the server's. Both numbers go into the manifest; the analysis
turns them into the run's health verdict.
"""

from __future__ import annotations

import time

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
