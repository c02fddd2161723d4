"""The client monitor's loop-lag probe: a pipe stamped by a helper process, read by the loop."""

from __future__ import annotations

import time

import gevent
import psutil

from harness.driver.client_health import LAG_PROBE_INTERVAL_S, ClientMonitor, unmeasured, worst_case
from harness.rundir.manifest import ClientHealth


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children()}


def test_an_idle_loop_reads_every_stamp_at_once():
    before = _children()
    monitor = ClientMonitor().start()
    gevent.sleep(1.0)
    health = monitor.stop()
    # The helper's first stamp comes one interval after it starts (plus its start-up).
    assert 0.5 / LAG_PROBE_INTERVAL_S <= health.loop_lag_probes <= 1.0 / LAG_PROBE_INTERVAL_S
    # A readable pipe wakes an idle loop at once: no millisecond rounding, as a timer has.
    assert health.loop_lag_p50_s is not None and health.loop_lag_p50_s < 0.002
    assert health.cpu_share < 0.5
    assert _children() == before, "the helper process is gone after stop()"


def test_a_blocked_loop_shows_as_lag():
    monitor = ClientMonitor().start()
    gevent.sleep(0.3)
    # The loop cannot run while this holds the CPU: stamps written meanwhile wait for it.
    began = time.perf_counter()
    while time.perf_counter() - began < 0.4:
        pass
    gevent.sleep(0.2)
    health = monitor.stop()
    assert health.loop_lag_max_s >= 0.3
    assert health.cpu_share > 0.3


def test_stop_before_start_measures_nothing():
    health = ClientMonitor().stop()
    assert health.loop_lag_probes == 0


def test_a_process_that_measured_nothing_leaves_the_worst_case_unchanged():
    measured = ClientHealth(cpu_share=0.3, loop_lag_p50_s=0.001, loop_lag_p99_s=0.004, loop_lag_max_s=0.02,
                            loop_lag_probes=40)
    assert worst_case([measured, unmeasured()]) == measured
