"""The client monitor: loop lags from a stamped pipe, the client's CPU share, and its helper process.

The arithmetic (stamps to lags, lags and CPU seconds to a health) runs on given instants,
so its figures are exact. Two tests watch the real helper and event loop on this
machine's clock; they are marked `timing`, with bounds a loaded machine keeps.
"""

from __future__ import annotations

import struct
import time

import gevent
import psutil
import pytest

from harness.driver.client_health import (
    LAG_PROBE_INTERVAL_S,
    ClientMonitor,
    LagLog,
    summarise,
    unmeasured,
    worst_case,
)
from harness.rundir.manifest import ClientHealth


def stamps(*instants: float) -> bytes:
    """What the helper writes: each instant as one little-endian double."""
    return b"".join(struct.pack("<d", instant) for instant in instants)


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children()}


def test_a_lag_is_the_read_instant_minus_the_stamp():
    log = LagLog()
    log.read(stamps(10.0, 10.25), now=10.5)
    log.read(stamps(10.75), now=10.75)
    assert log.lags == [0.5, 0.25, 0.0]


def test_a_stamp_cut_across_reads_counts_once_at_the_read_that_completes_it():
    log = LagLog()
    whole = stamps(10.0, 10.25)
    log.read(whole[:3], now=10.125)
    assert log.lags == []
    log.read(whole[3:11], now=10.25)
    assert log.lags == [0.25]
    log.read(whole[11:], now=10.5)
    assert log.lags == [0.25, 0.25]


def test_a_stamp_later_than_its_read_is_no_lag():
    log = LagLog()
    log.read(stamps(11.0), now=10.5)
    assert log.lags == [0.0]


def test_stamps_written_while_the_loop_was_blocked_show_the_block():
    # Blocked from 0 to 0.5 s: the stamps written meanwhile are all read when it ends.
    log = LagLog()
    log.read(stamps(0.125, 0.25, 0.375, 0.5), now=0.5)
    health = summarise(log.lags, cpu_s=0.5, wall_s=0.5)
    assert health.loop_lag_max_s == 0.375
    assert health.loop_lag_p50_s == 0.1875
    assert health.loop_lag_probes == 4
    assert health.cpu_share == 1.0


def test_the_cpu_share_is_cpu_seconds_per_wall_second_of_one_core():
    assert summarise([0.001], cpu_s=0.25, wall_s=2.0).cpu_share == 0.125
    assert summarise([0.001], cpu_s=1.0, wall_s=3.0).cpu_share == 0.3333
    # Two busy threads on two cores: more than one core's worth.
    assert summarise([0.001], cpu_s=3.0, wall_s=2.0).cpu_share == 1.5


def test_the_lag_percentiles_interpolate_over_every_probe():
    health = summarise([0.0] * 98 + [0.5, 1.0], cpu_s=0.0, wall_s=1.0)
    assert health.loop_lag_p50_s == 0.0
    assert health.loop_lag_p99_s == pytest.approx(0.505)
    assert health.loop_lag_max_s == 1.0
    assert health.loop_lag_probes == 100


def test_no_probe_and_no_time_is_zero_lag_and_zero_share():
    assert summarise([], cpu_s=0.0, wall_s=0.0) == unmeasured()


def test_stop_before_start_measures_nothing():
    health = ClientMonitor().stop()
    assert health.loop_lag_probes == 0


def test_stop_ends_the_helper_process():
    before = _children()
    monitor = ClientMonitor().start()
    assert len(_children() - before) == 1
    monitor.stop()
    assert _children() == before


@pytest.mark.timing
def test_an_idle_loop_reads_every_stamp_at_once():
    """Real time: the real helper, pipe and event loop on CLOCK_MONOTONIC.

    The bounds hold on a loaded machine: the helper cannot stamp more often than its
    interval, and an idle loop that wakes on a readable pipe reads within the
    scheduler's wake-up latency (a few ms with every core busy), where a loop that
    looked at the pipe once an interval would read half an interval late on median.
    """
    began = time.monotonic()
    monitor = ClientMonitor().start()
    gevent.sleep(1.0)
    health = monitor.stop()
    elapsed = time.monotonic() - began
    # The first stamp comes one interval after the helper has started (itself well under 0.5 s).
    assert 0.5 / LAG_PROBE_INTERVAL_S <= health.loop_lag_probes <= elapsed / LAG_PROBE_INTERVAL_S
    assert health.loop_lag_p50_s is not None and health.loop_lag_p50_s < LAG_PROBE_INTERVAL_S / 5
    assert health.cpu_share < 0.5


@pytest.mark.timing
def test_a_blocked_loop_shows_as_lag():
    """Real time: the loop is held for 0.4 s of wall time while the real helper keeps stamping.

    The stamp the helper writes first during the block waits for the rest of it; half
    the block allows the helper to be scheduled up to 0.15 s late on a loaded machine.
    """
    monitor = ClientMonitor().start()
    gevent.sleep(0.3)
    # The loop cannot run while this holds the CPU: stamps written meanwhile wait for it.
    began = time.perf_counter()
    while time.perf_counter() - began < 0.4:
        pass
    gevent.sleep(0.2)
    health = monitor.stop()
    assert health.loop_lag_max_s >= 0.2
    assert health.cpu_share > 0


def test_a_process_that_measured_nothing_leaves_the_worst_case_unchanged():
    measured = ClientHealth(cpu_share=0.3, loop_lag_p50_s=0.001, loop_lag_p99_s=0.004, loop_lag_max_s=0.02,
                            loop_lag_probes=40)
    assert worst_case([measured, unmeasured()]) == measured
