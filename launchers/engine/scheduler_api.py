"""What the static plugin and the step recorder read of vLLM's scheduler, checked at engine start.

None of it is public API, and releases move it (docs/servers.md#what-differs-between-vllm-releases):
- 0.34 dropped `CachedRequestData.resumed_req_ids`: a request resumed after preemption
  comes back in `scheduled_new_reqs`, as a new one does; before, it was a cached request
  named in that set.
- The waiting requests sit in more than one queue, and which ones changes: 0.30 has
  `waiting` and `skipped_waiting`, 0.31-0.33 `waiting` and `kv_holding_waiting`, 0.34 adds
  `async_kv_waiting`. `schedule()` admits from all of them, and vLLM's waiting gauge
  counts all of them.

`SchedulerApi.of` checks, once per engine, that every field and attribute read here and
in the mixins exists, and raises `UnsupportedScheduler` naming the first missing one:
a release that renames one stops the engine at start with that line, instead of writing
rows that are silently wrong. The queues are found by their type (vLLM's `RequestQueue`),
so one a release adds is hidden and counted like the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vllm import __version__ as vllm_version
from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.core.sched.request_queue import RequestQueue

from .vllm_releases import releases_in_words

# Dataclass fields read from each step's scheduler output (launchers.engine.step_recorder).
OUTPUT_FIELDS: dict[type, tuple[str, ...]] = {
    SchedulerOutput: ("num_scheduled_tokens", "scheduled_new_reqs", "scheduled_cached_reqs",
                      "total_num_scheduled_tokens"),
    NewRequestData: ("req_id", "num_computed_tokens"),
    CachedRequestData: ("req_ids", "num_computed_tokens"),
}
# Attributes of the scheduler itself, read by the recorder and by static admission.
SCHEDULER_ATTRIBUTES = ("waiting", "running", "requests", "max_num_running_reqs", "policy", "finished_req_ids")
# Where releases before 0.34 name the requests resumed in a step.
RESUMED_FIELD = "resumed_req_ids"


class UnsupportedScheduler(RuntimeError):
    """The running vLLM's scheduler lacks something the plugin or the recorder reads."""


@dataclass(frozen=True)
class SchedulerApi:
    """How this engine's vLLM release shapes what the mixins read; built once per scheduler."""

    # True before 0.34: resumed requests are cached requests named in `resumed_req_ids`.
    resumed_in_cached: bool
    # The scheduler's attributes that hold waiting requests, in the order they were found.
    waiting_queue_names: tuple[str, ...]

    @classmethod
    def of(cls, scheduler: Any) -> SchedulerApi:
        """Check `scheduler` (a constructed vLLM scheduler) has all that is read; UnsupportedScheduler if not."""
        for shape, names in OUTPUT_FIELDS.items():
            declared = {field.name for field in dataclasses.fields(shape)}
            for name in names:
                if name not in declared:
                    raise UnsupportedScheduler(_missing(f"{shape.__name__} has no field {name!r}"))
        for name in SCHEDULER_ATTRIBUTES:
            if not hasattr(scheduler, name):
                raise UnsupportedScheduler(_missing(f"{type(scheduler).__name__} has no attribute {name!r}"))
        queues = tuple(name for name, value in vars(scheduler).items() if isinstance(value, RequestQueue))
        if "waiting" not in queues:
            raise UnsupportedScheduler(_missing("the scheduler's 'waiting' is not a RequestQueue"))
        resumed = RESUMED_FIELD in {field.name for field in dataclasses.fields(CachedRequestData)}
        return cls(resumed_in_cached=resumed, waiting_queue_names=queues)

    def admitted(self, output: Any) -> list[str]:
        """Requests a step admits: new ones, and those resumed after preemption."""
        admitted = [new.req_id for new in output.scheduled_new_reqs]
        if self.resumed_in_cached:
            admitted += sorted(getattr(output.scheduled_cached_reqs, RESUMED_FIELD))
        return admitted

    def waiting_queues(self, scheduler: Any) -> Iterator[tuple[str, Any]]:
        """(attribute name, queue) of each queue of waiting requests."""
        for name in self.waiting_queue_names:
            yield name, getattr(scheduler, name)

    def num_waiting(self, scheduler: Any) -> int:
        """Requests waiting in any queue, as vLLM's waiting gauge counts them."""
        return sum(len(queue) for _, queue in self.waiting_queues(scheduler))


def _missing(what: str) -> str:
    return (f"batchbench's scheduler plugin cannot run on vLLM {vllm_version}: {what}, which static mode and the"
            f" step log read (tested on vLLM {releases_in_words()}; docs/servers.md#adding-a-vllm-release)")
