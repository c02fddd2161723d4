"""Ctrl-C and SIGTERM in a gevent process: unwind the main greenlet, wherever the signal lands.

Python's own SIGINT handler raises KeyboardInterrupt in whatever greenlet is running when
the signal arrives, often a Locust user, which dies of it with a traceback; SIGTERM's
default ends the process without unwinding anything. Thrown into the main greenlet
instead, it unwinds the run (which keeps its records and raises again) and every `with`
that started a server. A process that drives no load has no greenlets: there SIGTERM
only needs to raise KeyboardInterrupt as SIGINT already does.
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt_main() -> None:
    import gevent

    main_greenlet = gevent.get_hub().parent
    assert main_greenlet is not None, "the hub's parent is the main greenlet"
    main_greenlet.throw(KeyboardInterrupt)


def interrupt_main_on_signals() -> None:
    """From now on, SIGINT and SIGTERM raise KeyboardInterrupt in the main greenlet.

    For every `batchbench` command, and scripts that call `harness.driver.runner.execute`
    themselves; call it after harness.driver.gevent_process.patch_for_load where load is driven.
    """
    from gevent import monkey

    if not monkey.is_module_patched("signal"):
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return
    import gevent

    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, _interrupt_main)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
