"""Turn a request plan into the work items the load users send (pure, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import UsageError
from harness.systems import WAVE_SYSTEMS

if TYPE_CHECKING:  # the CLI reads DEFAULT_MAX_USERS; it should not pay for the workload stack
    from harness.workload.plan import RequestPlan

NO_WAVE = -1
# A client-static item's wave is formed when it is sent (harness.driver.dispatch), not planned.
FORMED_WAVE = -2
# A request that waits for no other's answer (not a conversation's later turn); also "not a conversation" for turn.
NO_TURN = -1
# Enough users that every CPU-sized burst goes out at once: with fewer users than
# requests, the rest wait for a user whose stream has ended, and behind a slow API server
# the engine then runs dry for seconds (docs/validation/process-layout.md).
DEFAULT_MAX_USERS = 4096
CLIENT_STATIC = "client-static"
# Output tokens of each warm-up request: enough decode steps to compile the batch's decode shapes.
WARM_UP_TOKENS = 8


@dataclass(frozen=True)
class WorkItem:
    """One request as the driver sends it."""

    request_id: int
    prompt: str
    planned_prompt_tokens: int
    planned_output_tokens: int
    # max_tokens = min_tokens sent: the planned output, or the wave's maximum when padded.
    requested_output_tokens: int
    wave: int
    # Offset from the run start at which to send; None: as soon as a user is free.
    arrival_s: float | None
    # A trace's request: its row and optional columns, carried into its record (-1 and "" elsewhere).
    trace_row: int = -1
    session: str = ""
    hash_ids: str = ""
    label: str = ""
    # A conversation's turn: its number, and for a later turn the request_id whose answer it waits for and the
    # think time after that answer's end at which it is due (harness.driver.dispatch).
    turn: int = NO_TURN
    after: int = NO_TURN
    think_s: float = 0.0


def build_work(plan: RequestPlan, prompts: Sequence[str], system: str, batch_size: int) -> list[WorkItem]:
    """Work items in send order.

    For `naive` (padded static batching, the Anyscale HF baseline) consecutive requests
    form waves of `batch_size`; every row of a wave asks for the wave's longest output,
    as a padded batch generates until its longest row is done. Waves are sent whole, each
    once the previous one has finished; on a trace a wave also waits for its last member
    to arrive (a batch cannot hold a request that has not come), in arrival order.
    Elsewhere per-request arrival times do not apply to waves.

    For `client-static` each request asks for its own output and keeps its arrival; its
    wave is formed as it goes out (FORMED_WAVE: the dispatcher's WaveRule).
    """
    if len(prompts) != len(plan.requests):
        raise ValueError(f"{len(prompts)} prompts for {len(plan.requests)} planned requests")
    requested = requested_outputs(plan, system, batch_size)
    wave_arrivals = _wave_arrivals(plan, batch_size)
    items = []
    for request, prompt, asked in zip(plan.requests, prompts, requested, strict=True):
        naive = system == "naive"
        wave = request.index // batch_size if naive else FORMED_WAVE if system == CLIENT_STATIC else NO_WAVE
        items.append(
            WorkItem(
                request_id=request.index,
                prompt=prompt,
                planned_prompt_tokens=request.prompt_tokens,
                planned_output_tokens=request.output_tokens,
                requested_output_tokens=asked,
                wave=wave,
                arrival_s=wave_arrivals[request.index // batch_size] if naive else request.arrival_s,
                trace_row=-1 if request.trace_row is None else request.trace_row,
                session=request.session or "",
                hash_ids=request.hash_ids or "",
                label=request.label or "",
                turn=NO_TURN if request.turn is None else request.turn,
                after=NO_TURN if request.after is None else request.after,
                think_s=request.think_s or 0.0,
            )
        )
    return items


def _wave_arrivals(plan: RequestPlan, batch_size: int) -> list[float | None]:
    """When each naive wave may be sent: on a trace, when its last member arrives; else at once."""
    waves = math.ceil(len(plan.requests) / batch_size)
    if plan.arrival != "trace":
        return [None] * waves
    return [plan.requests[min((wave + 1) * batch_size, len(plan.requests)) - 1].arrival_s for wave in range(waves)]


def requested_outputs(plan: RequestPlan, system: str, batch_size: int) -> list[int]:
    """The tokens each request asks for: its planned output, or its naive wave's longest.

    Refuses waves (naive, client-static) on a conversation: a wave in arrival order could
    hold a turn and the turn whose answer it waits for, and a batch cannot send one after
    the other.
    """
    outputs = [request.output_tokens for request in plan.requests]
    if system in WAVE_SYSTEMS and plan.conversation:
        kind = "padded waves" if system == "naive" else "waves"
        raise UsageError(f"{system}: a conversation cannot be sent in {kind} (a wave could hold a turn and the turn"
                         " whose answer it waits for): run it on continuous or static")
    if system != "naive":
        return outputs
    return [max(outputs[i - i % batch_size : i - i % batch_size + batch_size]) for i in range(len(outputs))]


def longest_requests(plan: RequestPlan, system: str, batch_size: int) -> list[int]:
    """Each request's prompt plus the tokens it will ask for."""
    asked = requested_outputs(plan, system, batch_size)
    return [request.prompt_tokens + tokens for request, tokens in zip(plan.requests, asked, strict=True)]


def check_fits(plan: RequestPlan, system: str, batch_size: int, max_model_len: int | None) -> None:
    """Refuse a plan with a request (prompt + tokens asked for) longer than the server's context, naming the
    first such request (its trace row, for a trace) and how many there are; and naive on a conversation
    (requested_outputs)."""
    lengths = longest_requests(plan, system, batch_size)
    if max_model_len is None:
        return
    over = [at for at, length in enumerate(lengths) if length > max_model_len]
    if not over:
        return
    first = plan.requests[over[0]]
    where = f"trace row {first.trace_row + 1}" if first.trace_row is not None else f"request {first.index}"
    asked = lengths[over[0]] - first.prompt_tokens
    hint = (": give the trace's max_tokens as at most that, with over_limit: clip to clip them"
            if first.trace_row is not None else "")
    raise UsageError(f"{len(over)} of {len(lengths)} requests exceed the server's max_model_len {max_model_len}"
                     f" (first: {where}, {first.prompt_tokens} + {asked} tokens){hint}")


def warm_up_choice(plan: RequestPlan, max_model_len: int | None) -> tuple[int, int]:
    """Which planned request's prompt the warm-up sends, and how many output tokens it asks for.

    The first prompt with room for WARM_UP_TOKENS in the server's context; else (every prompt
    near the limit, as a trace clipped to it) the shortest, asking for the room it has, at
    least 1 (check_fits has made sure the plan's requests fit).
    """
    if not plan.requests:
        raise ValueError("a plan without requests has nothing to warm up with")
    if max_model_len is None:
        return 0, WARM_UP_TOKENS
    roomy = next((request.index for request in plan.requests
                  if request.prompt_tokens + WARM_UP_TOKENS <= max_model_len), None)
    if roomy is not None:
        return roomy, WARM_UP_TOKENS
    shortest = min(plan.requests, key=lambda request: request.prompt_tokens)
    return shortest.index, max(1, max_model_len - shortest.prompt_tokens)


def check_one_process(system: str) -> None:
    """Refuse a distributed run (`--workers`) of client-static: it forms each wave from what has
    arrived, which one dispatcher sees and workers' shares of the plan do not."""
    if system == CLIENT_STATIC:
        raise UsageError(f"{CLIENT_STATIC} forms each wave from what has arrived, in one process: drop --workers")


def user_count(plan: RequestPlan, system: str, batch_size: int, max_users: int) -> int:
    """How many concurrent load users the plan needs.

    Closed loop: its users. Waves (naive, client-static): one per row of a wave. Open loop (burst, poisson):
    one per request up to `max_users`, so every request can be in flight at once; a
    request due while all users are busy is sent late, and its lateness is recorded.
    """
    if system in WAVE_SYSTEMS:
        return batch_size
    if plan.users is not None:
        return plan.users
    return max(1, min(len(plan.requests), max_users))
