"""The live part of one run: Locust users, telemetry, the client monitor, background greenlets.

`LiveLoad` holds each part from the moment it exists, so that `close()` can stop every
part that started, exactly once, whatever ended the run: its end, Ctrl-C or an error.
Runs inside a gevent-patched process (Locust patches on import).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import LocalRunner

from harness.driver.client_health import ClientMonitor
from harness.driver.tables import StoppedLoad
from harness.driver.user import DriverContext, make_user_class
from harness.rundir.manifest import ClientHealth
from harness.telemetry.metrics import TelemetrySample, TelemetrySampler


class LiveLoad:
    """What runs while a run's requests go out; a context manager that closes it.

    The parts stop in one fixed order: the background greenlets, the load users, their
    shared client, the telemetry sampler (its last poll covers the run's end), then the
    client monitor, whose window so spans the whole wind-down.
    """

    def __init__(self, context: DriverContext, host: str) -> None:
        self.context = context
        self.host = host
        self.environment: Environment | None = None
        self.runner: LocalRunner | None = None
        self.sampler: TelemetrySampler | None = None
        self.monitor: ClientMonitor | None = None
        # Set by close(): the monitor's verdict and every telemetry sample taken.
        self.health: ClientHealth | None = None
        self.samples: list[TelemetrySample] = []
        self._greenlets: list[gevent.Greenlet] = []
        self._closed = False

    def create_runner(self, ui_port: int | None = None) -> Environment:
        """Locust's environment and local runner (which starts its own greenlets); its web UI if asked."""
        self.environment = Environment(user_classes=[make_user_class(self.context)], host=self.host)
        self.runner = self.environment.create_local_runner()
        if ui_port is not None:
            self.environment.create_web_ui("127.0.0.1", ui_port)
        return self.environment

    def start_telemetry(self, sampler: TelemetrySampler) -> None:
        """Start polling /metrics; returns after the first poll, so the run's start is covered."""
        self.sampler = sampler
        sampler.start()

    def start_users(self, users: int) -> None:
        """Spawn every load user at once and wait until all exist."""
        assert self.runner is not None, "create_runner() first"
        self.runner.start(users, spawn_rate=max(users, 1) * 100.0)
        if self.runner.spawning_greenlet is not None:
            self.runner.spawning_greenlet.join()

    def start_monitor(self) -> None:
        """Start measuring the client's own CPU share and event-loop lag."""
        self.monitor = ClientMonitor()
        self.monitor.start()

    def spawn(self, function: Callable[..., Any], *args: Any) -> None:
        """Run `function(*args)` in a greenlet that close() kills."""
        self._greenlets.append(gevent.spawn(function, *args))

    def close(self) -> None:
        """Stop every part that started, each once, in the class's order; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        # An ExitStack runs every callback even when one raises, last in first out: so
        # they are pushed in reverse of the stopping order.
        with contextlib.ExitStack() as stops:
            if self.monitor is not None:
                stops.callback(self._stop_monitor, self.monitor)
            if self.sampler is not None:
                stops.callback(self._stop_sampler, self.sampler)
            stops.callback(self.context.client.close)
            if self.runner is not None:
                stops.callback(self.runner.quit)
            for greenlet in reversed(self._greenlets):
                stops.callback(greenlet.kill)

    @property
    def started_s(self) -> float | None:
        """When the run clock started (None: not yet)."""
        return self.context.dispatcher.start_s

    @property
    def total(self) -> int:
        return self.context.dispatcher.total

    @property
    def completed(self) -> int:
        return self.context.dispatcher.completed

    @property
    def generated_tokens(self) -> int:
        return self.context.generated_tokens

    @property
    def failed(self) -> int:
        return self.context.failed

    def stopped(self) -> StoppedLoad:
        """What the stopped load leaves for the run's tables (call after close())."""
        assert self.environment is not None, "a load that ran has its Locust environment"
        dispatcher = self.context.dispatcher
        return StoppedLoad(
            journal=self.context.journal,
            recorded=self.context.journal.recorded,
            handed_out=dispatcher.handed_out,
            not_due=dispatcher.not_due,
            sent=self.context.sent,
            worker=self.context.worker,
            samples=self.samples,
            environment=self.environment,
        )

    def _stop_monitor(self, monitor: ClientMonitor) -> None:
        self.health = monitor.stop()

    def _stop_sampler(self, sampler: TelemetrySampler) -> None:
        self.samples = sampler.stop()

    def __enter__(self) -> LiveLoad:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
