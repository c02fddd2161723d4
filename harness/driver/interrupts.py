"""Ctrl-C and SIGTERM in a gevent process: unwind the main greenlet, wherever the signal lands.

Python's own SIGINT handler raises KeyboardInterrupt in whatever greenlet is running when
the signal arrives, often a Locust user, which dies of it with a traceback; SIGTERM's
default ends the process without unwinding anything. Thrown into the main greenlet
instead, it unwinds the run (which keeps its records and raises again) and every `with`
that started a server.
"""

from __future__ import annotations

import signal

import gevent


def _interrupt_main() -> None:
    main_greenlet = gevent.get_hub().parent
    assert main_greenlet is not None, "the hub's parent is the main greenlet"
    main_greenlet.throw(KeyboardInterrupt)


def interrupt_main_on_signals() -> None:
    """From now on, SIGINT and SIGTERM raise KeyboardInterrupt in the main greenlet.

    For any process that runs loads in-process: the `batchbench` CLI, and scripts that
    call `harness.driver.runner.execute` themselves.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, _interrupt_main)
