"""Test-only vLLM scheduler plugin: every engine step made slower by a set share.

It stands in for a regression in the server under test, so the gate can be checked
against a real one. Launch a continuous server with
`--vllm-arg=--scheduler-cls=tests.engine_plugins.slow_steps.SlowRecordingScheduler`
(the last `--scheduler-cls` wins), `--server-env PYTHONPATH=<this checkout>` (the engine
finds this module there, and the step recorder in the staged engine package before it) and
`--server-env BATCHBENCH_TEST_STEP_SLOWDOWN=0.10`:
every step is stretched to 1 / (1 - 0.10) of the time it took (a sleep at its end), so
the server's throughput drops by 10%. Steps are still recorded, as for any launched server.
"""

from __future__ import annotations

import os
import time
from typing import Any

from launchers.engine.step_recorder import RecordingScheduler

SLOWDOWN_ENV = "BATCHBENCH_TEST_STEP_SLOWDOWN"
SCHEDULER_CLS = "tests.engine_plugins.slow_steps.SlowRecordingScheduler"


class SlowRecordingScheduler(RecordingScheduler):
    """vLLM's continuous admission and the step recorder, every step stretched by the slowdown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        slowdown = float(os.environ.get(SLOWDOWN_ENV, "0") or 0)
        # The sleep per second of step that takes a share `slowdown` off the throughput.
        self._stretch = slowdown / (1 - slowdown)
        self._step_began = time.perf_counter()

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        self._step_began = time.perf_counter()
        return super().schedule(*args, **kwargs)

    def update_from_output(self, *args: Any, **kwargs: Any) -> Any:
        # Before the recorder notes the step's end, so the step log shows the slower step.
        if self._stretch > 0:
            time.sleep(self._stretch * (time.perf_counter() - self._step_began))
        return super().update_from_output(*args, **kwargs)
