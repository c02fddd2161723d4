"""Engine-side truth: a `--scheduler-cls` layer that records every engine step inside vLLM.

Both modes run through it: continuous as `RecordingScheduler` (vLLM's own admission),
static as `launchers.static_scheduler.StaticBatchScheduler` (our admission). The
recorder is the outermost layer of each, so the two modes still differ only in
admission, and it sees the waiting queue as vLLM's metrics do.

One JSON line per step is appended to the file named by `BATCHBENCH_STEP_LOG` (no
file, no recording). Times are `time.time()` in the engine process: the same clock
as the client's records on one machine. Lines are buffered and written at most every
`FLUSH_INTERVAL_S`, and at once when the engine runs out of requests, so a run's
last steps are on disk by the time its last response has been delivered.

Each line: `t` (schedule() began), `end` (the step's model output reached the
scheduler), `running` (requests in the step), `waiting`, `prefill` and `decode`
(tokens scheduled), `context` (sum over the step's requests of the tokens they
attend to), `generated` (output tokens the step samples), `admitted` and `finished`
(vLLM request ids; ours carry the client's X-Request-Id inside them).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from launchers.engine_env import STEP_LOG_ENV

FLUSH_INTERVAL_S = 0.5

# The mixins below always sit in front of a vLLM scheduler class (see the concrete classes at
# the bottom of this module and of launchers.static_scheduler); to the type checker they are
# Scheduler subclasses, so it checks their use of its attributes. At run time their base stays
# `object`, so the MRO of the concrete classes is unchanged.
if TYPE_CHECKING:
    SchedulerMixinBase = Scheduler
else:
    SchedulerMixinBase = object


class StepRecorder(SchedulerMixinBase):
    """Mixin over a vLLM scheduler: one row per engine step, appended to the step log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get(STEP_LOG_ENV)
        self._step_log = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 (lives as long as the engine)
        self._step_lines: list[str] = []
        self._step_flushed = time.time()
        self._open_step: dict[str, Any] | None = None

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        """vLLM's (or the static plugin's) schedule(), with the step's shape noted."""
        began = time.time()
        output = super().schedule(*args, **kwargs)
        if self._step_log is None or not output.num_scheduled_tokens:
            return output
        prefill = context = sampling = 0
        for request_id, scheduled in output.num_scheduled_tokens.items():
            request = self.requests[request_id]
            # vLLM advances num_computed_tokens as it schedules: this step's tokens are included.
            computed_before = request.num_computed_tokens - scheduled
            prefill += max(0, min(scheduled, request.num_prompt_tokens - computed_before))
            context += request.num_computed_tokens
            # A request whose prompt is fully computed samples one output token this step.
            sampling += request.num_computed_tokens >= request.num_prompt_tokens
        admitted = [new.req_id for new in output.scheduled_new_reqs]
        admitted += sorted(output.scheduled_cached_reqs.resumed_req_ids)
        self._open_step = {
            "t": began,
            "running": len(output.num_scheduled_tokens),
            "waiting": len(self.waiting),
            "prefill": prefill,
            "decode": output.total_num_scheduled_tokens - prefill,
            "context": context,
            "generated": sampling,
            "admitted": admitted,
            "ids": list(output.num_scheduled_tokens),
        }
        return output

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        """vLLM's update_from_output(), then the step's row: its end and who finished."""
        ended = time.time()
        result = super().update_from_output(scheduler_output, model_runner_output)
        step, self._open_step = self._open_step, None
        if step is not None:
            scheduled = step.pop("ids")
            step["end"] = ended
            step["finished"] = [rid for rid in scheduled if rid in self.finished_req_ids]
            self._step_lines.append(json.dumps(step, separators=(",", ":")))
            idle = not self.running and not self.waiting
            if idle or ended - self._step_flushed >= FLUSH_INTERVAL_S:
                self._flush_steps(ended)
        return result

    def _flush_steps(self, now: float) -> None:
        if self._step_log is not None and self._step_lines:
            self._step_log.write("\n".join(self._step_lines) + "\n")
            self._step_log.flush()
        self._step_lines.clear()
        self._step_flushed = now


class RecordingScheduler(StepRecorder, Scheduler):
    """vLLM's own (continuous) admission, recorded."""


class AsyncRecordingScheduler(StepRecorder, AsyncScheduler):
    """vLLM's own (continuous) admission over its async scheduler, recorded."""
