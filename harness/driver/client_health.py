"""How the load client itself fared during a run: its CPU share and its event-loop lag.

A client that is short of CPU sends late and timestamps late, so its figures are
the client's, not the server's. Both numbers go into the manifest; the analysis
turns them into the run's health verdict.

The lag is measured the way a token suffers it: a helper process writes its clock
(CLOCK_MONOTONIC, one clock for every process) into a pipe every 50 ms, and the
client's event loop reads it like any response; the lag is read time minus written
time. Not a timer probe (sleep 50 ms, see how late it wakes): libev rounds a timed wait
up to the next millisecond, while a readable socket wakes the loop at once, so a timer
reads a floor of tenths of a millisecond even on an idle loop, enough at CPU inter-token
times to pass the client-bound limit (5% of the ITL) for a client that is nearly idle
(docs/validation/client-ceiling.md).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence

import gevent
import gevent.os
import numpy as np
import psutil

from harness.rundir.manifest import ClientHealth

LAG_PROBE_INTERVAL_S = 0.05
# The helper: its clock, as one little-endian double, every interval, until the pipe closes.
_STAMPER = """
import os, struct, sys, time
interval = float(sys.argv[1])
while True:
    time.sleep(interval)
    try:
        os.write(1, struct.pack("<d", time.monotonic()))
    except OSError:
        break
"""
_STAMP = struct.Struct("<d")


class ClientMonitor:
    """Measures this process's CPU time and how long a ready pipe waits for its event loop."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._lags = LagLog()
        self._greenlet: gevent.Greenlet | None = None
        self._stamper: subprocess.Popen[bytes] | None = None
        self._cpu0 = 0.0
        self._wall0 = 0.0

    def start(self) -> ClientMonitor:
        times = self._process.cpu_times()
        self._cpu0, self._wall0 = times.user + times.system, time.monotonic()
        # -I -S: no site packages or user paths to import; it only needs the standard library.
        self._stamper = subprocess.Popen([sys.executable, "-I", "-S", "-c", _STAMPER, str(LAG_PROBE_INTERVAL_S)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        assert self._stamper.stdout is not None
        self._greenlet = gevent.spawn(self._probe, self._stamper.stdout.fileno())
        return self

    def stop(self) -> ClientHealth:
        """Stop probing; the client's CPU share (of one core) and loop lag since start()."""
        if self._greenlet is not None:
            self._greenlet.kill()
        if self._stamper is not None:
            self._stamper.kill()
            self._stamper.wait()
            assert self._stamper.stdout is not None
            self._stamper.stdout.close()
        times = self._process.cpu_times()
        return summarise(self._lags.lags, times.user + times.system - self._cpu0, time.monotonic() - self._wall0)

    def _probe(self, fd: int) -> None:
        gevent.os.make_nonblocking(fd)
        while chunk := gevent.os.nb_read(fd, 4096):
            # The helper's clock: lags are only lags when both ends read CLOCK_MONOTONIC.
            self._lags.read(chunk, time.monotonic())


class LagLog:
    """Loop lags from the helper's stamps: the instant each was read minus the instant it was written."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._pending = b""

    def read(self, chunk: bytes, now: float) -> None:
        """Take one read off the pipe, made at `now`; a stamp cut across reads counts once whole."""
        self._pending += chunk
        whole = len(self._pending) - len(self._pending) % _STAMP.size
        self.lags.extend(max(0.0, now - stamp) for (stamp,) in _STAMP.iter_unpack(self._pending[:whole]))
        self._pending = self._pending[whole:]


def summarise(lags: Sequence[float], cpu_s: float, wall_s: float) -> ClientHealth:
    """A client's health from its loop lags and the CPU seconds it used over `wall_s` seconds."""
    values = np.array(lags) if lags else np.zeros(1)
    return ClientHealth(
        cpu_share=round(cpu_s / max(wall_s, 1e-9), 4),
        loop_lag_p50_s=float(np.percentile(values, 50)),
        loop_lag_p99_s=float(np.percentile(values, 99)),
        loop_lag_max_s=float(values.max()),
        loop_lag_probes=len(lags),
    )


def unmeasured() -> ClientHealth:
    """The health of a process that reports before its monitor started: no time, no probe."""
    return ClientHealth(cpu_share=0.0, loop_lag_p50_s=0.0, loop_lag_p99_s=0.0, loop_lag_max_s=0.0, loop_lag_probes=0)


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
