"""Forced static batching inside a real vLLM engine (a `--scheduler-cls` plugin).

Only admission changes. A batch is formed from up to `max_num_seqs` waiting requests
when no member of the previous batch is still unfinished; nothing joins a running
batch. Members that need several steps to prefill, or are preempted, stay members
until they finish. Everything else (token budget, chunked prefill, KV allocation,
preemption, async scheduling) is vLLM's own code, so the measured gap is batching alone.

The trick: for the duration of each `schedule()` call, each of vLLM's waiting queues
(`self.waiting`, and the others a release has: launchers.engine.scheduler_api) holds only the
members of the current batch; the other waiting requests are put back afterwards, in
their order, so vLLM's metrics still count them as waiting.

Every engine step is recorded by `launchers.engine.step_recorder`, as in continuous mode.

Two classes, because vLLM chooses `AsyncScheduler` when async scheduling is on and
a plain `Scheduler` subclass would silently turn it off. The launcher passes the
same async setting to both modes and picks the matching class here.

`BATCHBENCH_STATIC_BATCH_WAIT_S` (env, default 0): when fewer than `max_num_seqs`
requests are waiting, wait until the oldest of them has waited that long (from its
arrival at the server) before starting a partial batch.
"""

from __future__ import annotations

import os
import time

from vllm.logger import init_logger
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.request_queue import create_request_queue
from vllm.v1.core.sched.scheduler import Scheduler

from .engine_env import BATCH_WAIT_ENV
from .scheduler_api import SchedulerApi
from .step_recorder import SchedulerMixinBase, StepRecorder

logger = init_logger(__name__)


class StaticAdmission(SchedulerMixinBase):
    """Mixin over a vLLM scheduler: admit a new batch only when the last one drained."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._api = SchedulerApi.of(self)
        self._batch: set[str] = set()
        self._batch_wait_s = float(os.environ.get(BATCH_WAIT_ENV, "0") or 0)
        self._batches_formed = 0
        logger.info(
            "batchbench static batching: batch size %d, batch_wait_s %.3f",
            self.max_num_running_reqs,
            self._batch_wait_s,
        )

    def schedule(self, *args, **kwargs):
        """Run vLLM's own schedule() with only the current batch's members visible as waiting."""
        self._drop_finished_members()
        if not self._batch:
            self._maybe_form_batch()
        hidden = {}
        for name, everyone in self._api.waiting_queues(self):
            members = create_request_queue(self.policy)
            for request in everyone:
                if request.request_id in self._batch:
                    members.add_request(request)
            everyone.remove_requests(list(members))
            hidden[name] = everyone
            setattr(self, name, members)
        try:
            return super().schedule(*args, **kwargs)
        finally:
            # Members left waiting (not yet admitted, or preempted back) keep their place first.
            for name, others in hidden.items():
                queue = getattr(self, name)
                for request in others:
                    queue.add_request(request)

    def _drop_finished_members(self) -> None:
        self._batch = {
            request_id
            for request_id in self._batch
            if request_id in self.requests and not self.requests[request_id].is_finished()
        }

    def _maybe_form_batch(self) -> None:
        # In arrival order across the queues (a queue keeps its own order: FCFS).
        waiting = sorted((request for _, queue in self._api.waiting_queues(self) for request in queue),
                         key=lambda request: request.arrival_time)
        if not waiting:
            return
        full = len(waiting) >= self.max_num_running_reqs
        oldest_arrival = min(request.arrival_time for request in waiting)
        if not full and time.time() - oldest_arrival < self._batch_wait_s:
            return
        self._batch = {request.request_id for request in waiting[: self.max_num_running_reqs]}
        self._batches_formed += 1
        logger.debug("batchbench static batch %d: %d members", self._batches_formed, len(self._batch))


# The recorder is the outer layer, as in continuous mode (launchers.engine.step_recorder).
class StaticBatchScheduler(StepRecorder, StaticAdmission, Scheduler):
    """Static batching over vLLM's synchronous scheduler (async scheduling off), recorded."""


class AsyncStaticBatchScheduler(StepRecorder, StaticAdmission, AsyncScheduler):
    """Static batching over vLLM's async scheduler (async scheduling on), recorded."""

