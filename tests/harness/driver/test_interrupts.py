"""Ctrl-C and SIGTERM reach the main greenlet even while a busy greenlet holds the CPU."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# A Locust user's CPU work stands in as the busy greenlet: the signal lands while it runs.
# No clock: a slice is a fixed amount of work, and "alive" means it ran another slice after the interrupt.
SCRIPT = """
from gevent import monkey
monkey.patch_all()
import gevent
from gevent.event import Event
from harness.driver.interrupts import interrupt_main_on_signals
interrupt_main_on_signals()
slices = 0

def busy():
    global slices
    while True:
        sum(range(1_000_000))
        slices += 1
        gevent.sleep(0)

worker = gevent.spawn(busy)
print("ready", flush=True)
try:
    Event().wait()
except KeyboardInterrupt:
    # A greenlet that took the interrupt dies of it once main yields; a live one runs another slice.
    seen = slices
    while slices == seen and not worker.dead:
        gevent.sleep(0)
    print(f"main interrupted, busy greenlet alive: {not worker.dead}", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_unwinds_the_main_greenlet_not_the_one_running(signum):
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 0, stderr
    assert stdout.strip() == "main interrupted, busy greenlet alive: True"
    assert "Traceback" not in stderr
