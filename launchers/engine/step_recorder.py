"""Engine-side truth: a `--scheduler-cls` layer that records every engine step inside vLLM.

Both modes run through it: continuous as `RecordingScheduler` (vLLM's own admission),
static as `launchers.engine.static_scheduler.StaticBatchScheduler` (our admission). The
recorder is the outermost layer of each, so the two modes still differ only in
admission, and it sees the waiting queue as vLLM's metrics do.

vLLM's engine core calls the scheduler in two orders. Without async scheduling each
`schedule()` is followed by its own `update_from_output()`. With async scheduling (every
GPU run) or pipeline parallelism it keeps a batch queue: `schedule()` for step N+1 (up to
N+depth-1) runs before `update_from_output()` for step N. So a step is held open per
scheduler output, matched by identity when its output comes back, and rows are written
in the order the steps were scheduled.

One JSON line per step is appended to the file named by `BATCHBENCH_STEP_LOG` (no
file, no recording). Times are `time.time()` in the engine process: the same clock
as the client's records on one machine. Lines are buffered and written at most every
`FLUSH_INTERVAL_S`, and at once when the engine runs out of requests, so a run's
last steps are on disk by the time its last response has been delivered.

Each line: `t` (schedule() began), `end` (the step's model output reached the
scheduler), `running` (requests in the step), `waiting` (in any of vLLM's waiting queues), `prefill` and `decode`
(tokens scheduled), `context` (sum over the step's requests of the tokens they
attend to), `prefill_pairs` (the (query, key) pairs the step's prompt tokens attend over:
a chunk of c prompt tokens after p computed ones attends over c*p + c*(c+1)/2, so a
prompt's attention grows with its square), `generated` (output tokens the step samples and vLLM keeps), `admitted`
and `finished` (vLLM request ids; ours carry the client's X-Request-Id inside them).
Under a batch queue a step's `t` can precede the previous step's `end`: it was
scheduled while that one still ran; and a step scheduled past a request's last token
still carries it in `running`, while the dropped token is not counted in `generated`.
A request that leaves between steps (an abort) is `finished` on the next row written.

What is read of vLLM's scheduler, and how each release differs there, is in
`launchers.engine.scheduler_api`, checked when the engine starts.

The work per step is kept off the per-request path where vLLM already did it: the
context comes from the counts vLLM put in the scheduler output, and only requests
still in their prompt (new, resumed or mid-prefill) are looked at one by one.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from .engine_env import STEP_LOG_ENV
from .scheduler_api import SchedulerApi

FLUSH_INTERVAL_S = 0.5

# The mixins below always sit in front of a vLLM scheduler class (see the concrete classes at
# the bottom of this module and of launchers.engine.static_scheduler); to the type checker they are
# Scheduler subclasses, so it checks their use of its attributes. At run time their base stays
# `object`, so the MRO of the concrete classes is unchanged.
if TYPE_CHECKING:
    SchedulerMixinBase = Scheduler
else:
    SchedulerMixinBase = object


class _OpenStep:
    """A scheduled step waiting for its model output: its row so far and whom it scheduled."""

    __slots__ = ("output", "row", "closed", "stale")

    def __init__(self, output: Any, row: dict[str, Any]) -> None:
        self.output = output
        self.row = row
        self.closed = False
        # Scheduled requests that left the engine before this step's output came back: the
        # step computed their tokens, and vLLM drops them (a batch queue schedules ahead).
        self.stale: set[str] = set()


class StepRecorder(SchedulerMixinBase):
    """Mixin over a vLLM scheduler: one row per engine step, appended to the step log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # What this release's scheduler looks like; a missing field stops the engine here, by name.
        self._api = SchedulerApi.of(self)
        path = os.environ.get(STEP_LOG_ENV)
        self._step_log = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115 (lives as long as the engine)
        self._step_lines: list[str] = []
        self._step_flushed = time.time()
        # Steps scheduled and not yet written, in step order, keyed by id() of their output
        # (the engine core holds each output until its update, so ids cannot be reused).
        self._open_steps: OrderedDict[int, _OpenStep] = OrderedDict()
        # Requests whose prompt was not fully computed after their last scheduled step.
        self._prefilling: set[str] = set()
        # Requests that left the engine (finished or aborted) and are not written yet, and
        # those written since vLLM last cleared its `finished_req_ids` (in schedule()).
        self._ended: set[str] = set()
        self._ends_written: set[str] = set()

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        """vLLM's (or the static plugin's) schedule(), with the step's shape noted."""
        began = time.time()
        self._note_ended()
        output = super().schedule(*args, **kwargs)
        self._ends_written.clear()
        if self._step_log is None or not output.num_scheduled_tokens:
            return output
        self._open_steps[id(output)] = _OpenStep(output, self._shape(output, began))
        return output

    def _shape(self, output: Any, began: float) -> dict[str, Any]:
        scheduled: dict[str, int] = output.num_scheduled_tokens
        cached = output.scheduled_cached_reqs
        new = output.scheduled_new_reqs
        # vLLM puts each request's computed tokens *before* this step in the output.
        context = sum(cached.num_computed_tokens) + sum(n.num_computed_tokens for n in new)
        context += output.total_num_scheduled_tokens
        admitted = self._api.admitted(output)
        # Only a request still in its prompt can schedule prompt tokens or skip sampling.
        # (Iterating the small set: set.intersection(dict) would walk every scheduled request.)
        candidates = {rid for rid in self._prefilling if rid in scheduled}.union(admitted)
        prefill = pairs = still_prefilling = 0
        for request_id in candidates:
            request = self.requests[request_id]
            computed = request.num_computed_tokens  # vLLM advanced it as it scheduled
            prompt = request.num_prompt_tokens
            before = computed - scheduled[request_id]
            chunk = max(0, min(scheduled[request_id], prompt - before))
            prefill += chunk
            pairs += chunk * before + chunk * (chunk + 1) // 2
            if computed < prompt:
                still_prefilling += 1
                self._prefilling.add(request_id)
            else:
                self._prefilling.discard(request_id)
        return {
            "t": began,
            "running": len(scheduled),
            "waiting": self._api.num_waiting(self),
            "prefill": prefill,
            "decode": output.total_num_scheduled_tokens - prefill,
            "context": context,
            "prefill_pairs": pairs,
            # A request whose prompt is fully computed samples one output token this step.
            "generated": len(scheduled) - still_prefilling,
            "admitted": admitted,
        }

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        """vLLM's update_from_output(), then the row of the step this output belongs to."""
        ended = time.time()
        step = self._open_steps.get(id(scheduler_output))
        if step is not None:
            self._note_ended()
            step.stale.update(rid for rid in self._ended if rid in scheduler_output.num_scheduled_tokens)
        result = super().update_from_output(scheduler_output, model_runner_output)
        if step is None:
            return result
        step.row["end"] = ended
        step.row["finished"] = self._finished_in(step)
        step.row["generated"] -= len(step.stale)
        step.closed = True
        while self._open_steps:
            first = next(iter(self._open_steps.values()))
            if not first.closed:
                break
            self._open_steps.popitem(last=False)
            self._step_lines.append(json.dumps(first.row, separators=(",", ":")))
        idle = not self.running and not self.waiting
        if idle or ended - self._step_flushed >= FLUSH_INTERVAL_S:
            self._flush_steps(ended)
        return result

    def _note_ended(self) -> None:
        if self.finished_req_ids:
            self._ended.update(self.finished_req_ids.difference(self._ends_written))

    def _finished_in(self, step: _OpenStep) -> list[str]:
        """Who left the engine by this step's end: those it scheduled, and those no later open step holds.

        A request aborted between steps is in no open step: it goes on the next row written.
        Later open steps that scheduled any of them learn that those tokens are dropped.
        """
        self._note_ended()
        if not self._ended:
            return []
        scheduled = step.output.num_scheduled_tokens
        later = [other.output.num_scheduled_tokens for other in self._open_steps.values() if other is not step]
        finished = sorted(
            rid for rid in self._ended if rid in scheduled or not any(rid in ids for ids in later)
        )
        for other in self._open_steps.values():
            if other is not step:
                other.stale.update(rid for rid in self._ended if rid in other.output.num_scheduled_tokens)
        self._ended.difference_update(finished)
        self._ends_written.update(finished)
        if self._prefilling:
            self._prefilling = {rid for rid in self._prefilling if rid in self.requests}
        return finished

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
