"""Predict the schedule and throughput of continuous, static and naive batching.

Conventions (shared by every system):
- A *step* is one forward pass of the batch; each sequence in it gains one token.
- A request with `n` output tokens occupies exactly `n` steps. The first of them is its
  admission step, which runs its prefill and produces its first token, so its first
  token exists at the end of the admission step and its last at the end of step `n`.
- A *slot* is one row of the batch for one step: every step has `B` slots, whether
  filled or not. A slot is *useful* when it produces a token the request asked for;
  naive batching's padding tokens fill slots but are not useful.
- Time starts at 0, the moment the workload starts; arrivals are offsets from it and
  the makespan runs from 0 to the last finish (idle waits included).
- Requests are admitted first come, first served (ties in arrival by index), into the
  lowest free row.

- A sequence's context in a step is the tokens it attends to: its prompt in its
  admission step, one more in each step after. A step's context is the sum over its
  sequences; a naive row's prompt is the wave's longest.

The simulation is event driven: which sequences are in a step changes only when a
request joins or finishes, so a run of steps between two such events is taken in one
jump, its steps' costs asked of the step cost together (step_cost.StepCost: by batch
size only, or also by context and prefill).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.paper.step_cost import StepCost
from harness.systems import CLIENT_SYSTEMS, SYSTEMS, WAVE_SYSTEMS, SystemName

# The systems simulated: vLLM's three, and static batching kept by the client.
SIMULATED: tuple[SystemName, ...] = (*SYSTEMS, *CLIENT_SYSTEMS)

# Arrivals within a nanosecond of a step boundary count as arrived by it, so float
# rounding in the accumulated clock cannot push an admission one step late.
_ARRIVAL_TOLERANCE_S = 1e-9
# Extrapolating a steep calibration below its smallest batch could reach zero or go
# negative; no real step is cheaper than a small fraction of the cheapest measured one.
_MIN_STEP_FRACTION = 0.01


@dataclass(frozen=True)
class InterpolatedStepCost:
    """Seconds per decode step as a function of how many sequences are in the step.

    Linear between calibration points, linear beyond them (extending the end
    segments), never below 1% of the smallest calibrated time. One point means a
    constant step cost. Admitting a request adds `prefill_s_per_token * prompt_tokens`
    to its admission step.
    """

    batch_sizes: tuple[int, ...]
    seconds: tuple[float, ...]
    prefill_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        if not self.batch_sizes or len(self.batch_sizes) != len(self.seconds):
            raise ValueError("step cost points: need at least one (batch size, seconds) pair")
        if any(b < 1 for b in self.batch_sizes) or list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise ValueError("step cost batch sizes: must be distinct positive integers in increasing order")
        if not all(math.isfinite(s) and s > 0 for s in self.seconds):
            raise ValueError("step cost seconds: every step's seconds must be positive and finite")
        if not (math.isfinite(self.prefill_s_per_token) and self.prefill_s_per_token >= 0):
            raise ValueError("prefill_s_per_token: must be zero or positive")

    @classmethod
    def from_points(cls, points: dict[int, float], prefill_s_per_token: float = 0.0) -> InterpolatedStepCost:
        """Build from calibration points {batch size: seconds per decode step}."""
        ordered = sorted(points.items())
        return cls(
            batch_sizes=tuple(int(b) for b, _ in ordered),
            seconds=tuple(float(s) for _, s in ordered),
            prefill_s_per_token=float(prefill_s_per_token),
        )

    def decode_step_s(self, active: int) -> float:
        """Seconds for one decode step with `active` sequences (prefill not included)."""
        if active < 1:
            raise ValueError(f"active: a step needs at least one sequence, got {active}")
        xs, ys = self.batch_sizes, self.seconds
        if len(xs) == 1:
            return ys[0]
        if active <= xs[0]:
            left, right = 0, 1
        elif active >= xs[-1]:
            left, right = len(xs) - 2, len(xs) - 1
        else:
            right = int(np.searchsorted(xs, active))
            left = right - 1
        slope = (ys[right] - ys[left]) / (xs[right] - xs[left])
        value = ys[left] + slope * (active - xs[left])
        return max(value, _MIN_STEP_FRACTION * min(ys))

    def step_seconds(self, active: int, context_tokens: np.ndarray, prefill_tokens: int,
                     prefill_pairs: float = 0.0) -> np.ndarray:
        """Seconds of each step of a run (step_cost.StepCost): context does not change the cost."""
        step_s = self.decode_step_s(active) + self.prefill_s_per_token * prefill_tokens
        return np.full(len(context_tokens), step_s)


@dataclass(frozen=True, eq=False)
class ScheduleResult:
    """The predicted schedule of one system on one workload.

    Per-step arrays have one entry per step; per-request arrays are in input order.
    `active` counts rows that compute in a step: for naive batching that includes
    padding rows, so its occupancy is high while its useful fraction is not.
    """

    system: SystemName
    batch_size: int
    makespan_s: float
    num_steps: int
    step_active: np.ndarray
    step_duration_s: np.ndarray
    admit_step: np.ndarray
    end_step: np.ndarray
    slot: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: int
    useful_token_slots: int
    generated_tokens: int
    total_token_slots: int
    useful_fraction: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    mean_occupancy: float
    mean_occupancy_per_step: float


def simulate(
    system: SystemName,
    output_tokens: Sequence[int] | np.ndarray,
    batch_size: int,
    step_cost: StepCost,
    prompt_tokens: Sequence[int] | np.ndarray | None = None,
    arrivals: Sequence[float] | np.ndarray | None = None,
    wave_gap_s: float = 0.0,
    static_batch_wait_s: float = 0.0,
) -> ScheduleResult:
    """Predict how `system` schedules the requests with batch width `B`.

    - continuous: after every step finished requests leave and arrived requests fill
      the free rows; a step's cost counts the sequences in it.
    - static: a batch of up to B arrived requests starts only when the previous one
      has fully finished; finished rows stop costing but stay empty until the longest
      member ends; a step's cost counts the members still generating. With
      `static_batch_wait_s`, a batch forms only once B requests wait or the oldest has
      waited that long (the static server's max batch delay, launchers.engine.static_scheduler).
    - naive: padded static batching; every row of a wave generates (and prefills) to
      the wave's longest member, so each step costs a full wave, and every request is
      returned at the wave's end. Each wave after the first starts `wave_gap_s` after
      the previous one ended: the client must receive a whole wave before it sends the
      next, and the engine idles meanwhile.
    - client-static: static's schedule, its batches formed by the client (with
      `static_batch_wait_s`, the client's wait for a full wave), and naive's `wave_gap_s`
      between waves: the client sends a wave once the previous one has reached it.

    `step_cost` gives each step's seconds from its sequences, context and prefill
    tokens (InterpolatedStepCost looks at the sequences and prefill only).

    output_tokens_per_s counts useful tokens only; total_tokens_per_s adds prompt tokens
    (the Anyscale definition). mean_occupancy is active/B weighted by step duration;
    mean_occupancy_per_step is the unweighted mean; both cover steps only, so idle gaps
    waiting for arrivals lower the throughputs but not the occupancies.
    """
    if system not in SIMULATED:
        raise ValueError(f"system: must be one of {', '.join(SIMULATED)}, got {system!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size: must be a positive integer, got {batch_size!r}")
    outputs = token_counts("output_tokens", output_tokens, minimum=1)
    n = len(outputs)
    if prompt_tokens is None:
        prompts = np.zeros(n, dtype=np.int64)
    else:
        prompts = token_counts("prompt_tokens", prompt_tokens, minimum=0)
    times = np.zeros(n) if arrivals is None else _arrivals(arrivals)
    if len(prompts) != n:
        raise ValueError(f"prompt_tokens: has {len(prompts)} entries, output_tokens has {n}")
    if len(times) != n:
        raise ValueError(f"arrivals: has {len(times)} entries, output_tokens has {n}")
    for name, value in (("wave_gap_s", wave_gap_s), ("static_batch_wait_s", static_batch_wait_s)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}: must be zero or positive seconds, got {value!r}")
    batch_wait_s = float(static_batch_wait_s) if system in ("static", "client-static") else 0.0
    trace = _run(system, outputs, prompts, times, int(batch_size), step_cost, float(wave_gap_s), batch_wait_s)
    return _result(system, int(batch_size), outputs, prompts, trace)


@dataclass(frozen=True)
class SlotSpan:
    """One request's stay in one batch row: steps [start_step, end_step).

    The row produces wanted tokens in [start_step, useful_end_step); any remainder up
    to end_step is naive batching's padding.
    """

    row: int
    request: int
    start_step: int
    end_step: int
    useful_end_step: int


def slot_diagram(output_tokens: Sequence[int] | np.ndarray, batch_size: int, system: SystemName) -> list[SlotSpan]:
    """Which request holds which row during which steps, for a burst (all at t=0).

    With every request present at the start, admissions depend only on step counts,
    never on step durations, so no step cost is needed. Spans come in request order.
    """
    result = simulate(system, output_tokens, batch_size, InterpolatedStepCost.from_points({1: 1.0}))
    outputs = token_counts("output_tokens", output_tokens, minimum=1)
    return [
        SlotSpan(
            row=int(result.slot[i]),
            request=i,
            start_step=int(result.admit_step[i]),
            end_step=int(result.end_step[i]),
            useful_end_step=int(result.admit_step[i] + outputs[i]),
        )
        for i in range(len(outputs))
    ]


@dataclass
class _Trace:
    """What the event loop records: runs of steps and per-request events.

    `run_duration_s` holds one array per run, the seconds of each of its steps.
    `context_offset` is a seated request's prompt minus its admission step, so its
    context at step s is context_offset + s.
    """

    run_steps: list[int]
    run_active: list[int]
    run_duration_s: list[np.ndarray]
    admit_step: np.ndarray
    end_step: np.ndarray
    slot: np.ndarray
    context_offset: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray


def _run(
    system: SystemName,
    outputs: np.ndarray,
    prompts: np.ndarray,
    arrivals: np.ndarray,
    batch_size: int,
    step_cost: StepCost,
    wave_gap_s: float,
    batch_wait_s: float,
) -> _Trace:
    """Event loop: admit, run steps up to the next event, retire, repeat."""
    n = len(outputs)
    refill_every_step = system == "continuous"
    padded = system == "naive"
    order = np.argsort(arrivals, kind="stable")
    trace = _Trace(
        run_steps=[],
        run_active=[],
        run_duration_s=[],
        admit_step=np.zeros(n, dtype=np.int64),
        end_step=np.zeros(n, dtype=np.int64),
        slot=np.zeros(n, dtype=np.int64),
        context_offset=np.zeros(n, dtype=np.int64),
        first_token_s=np.zeros(n),
        finish_s=np.zeros(n),
    )
    running: list[tuple[int, int]] = []  # heap of (end step, request)
    free_rows = list(range(batch_size))  # a heap, so the lowest free row is taken first
    clock, step, queued = 0.0, 0, 0
    context_offset = 0  # sum of the running requests' context offsets
    while True:
        admitted: list[int] = []
        if batch_wait_s > 0 and not running and queued < n and _arrived(arrivals[order[queued]], clock):
            # An idle static server forms its batch when B wait or the oldest has waited batch_wait_s.
            full_at = float(arrivals[order[queued + batch_size - 1]]) if queued + batch_size <= n else math.inf
            clock = max(clock, min(full_at, float(arrivals[order[queued]]) + batch_wait_s))
        if refill_every_step or not running:
            while len(admitted) < len(free_rows) and queued < n and _arrived(arrivals[order[queued]], clock):
                admitted.append(int(order[queued]))
                queued += 1
        if not running and not admitted:
            if queued == n:
                return trace
            clock = max(clock, float(arrivals[order[queued]]))
            continue
        prefill_tokens, prefill_pairs = _admit(admitted, outputs, prompts, padded, step, running, free_rows, trace)
        context_offset += int(trace.context_offset[admitted].sum())
        active = len(running)
        # The admission step is the only one carrying prefill: run it alone.
        steps = 1 if prefill_tokens > 0 else running[0][0] - step
        contexts = context_offset + active * np.arange(step, step + steps, dtype=np.int64)
        durations = step_cost.step_seconds(active, contexts, prefill_tokens, prefill_pairs)
        if refill_every_step and free_rows and queued < n and steps > 1:
            # Stop at the first step boundary at or after the next arrival.
            wait_s = float(arrivals[order[queued]]) - clock
            reached = int(np.searchsorted(np.cumsum(durations), wait_s - _ARRIVAL_TOLERANCE_S)) + 1
            steps = min(steps, max(1, reached))
            durations = durations[:steps]
        for request in admitted:
            trace.first_token_s[request] = clock + float(durations[0])
        trace.run_steps.append(steps)
        trace.run_active.append(active)
        trace.run_duration_s.append(durations)
        clock += float(durations.sum())
        step += steps
        while running and running[0][0] == step:
            _, request = heapq.heappop(running)
            trace.finish_s[request] = clock
            context_offset -= int(trace.context_offset[request])
            heapq.heappush(free_rows, int(trace.slot[request]))
        if system in WAVE_SYSTEMS and not running and queued < n:
            clock += wave_gap_s


def _arrived(arrival_s: float, clock_s: float) -> bool:
    """Whether a request arriving at `arrival_s` may join a step starting at `clock_s`."""
    return arrival_s <= clock_s + _ARRIVAL_TOLERANCE_S


def _admit(
    admitted: list[int],
    outputs: np.ndarray,
    prompts: np.ndarray,
    padded: bool,
    step: int,
    running: list[tuple[int, int]],
    free_rows: list[int],
    trace: _Trace,
) -> tuple[int, float]:
    """Seat the admitted requests; return the prompt tokens their prefill processes and the
    (query, key) pairs those attend over (a prompt of p tokens: p*(p+1)/2, however vLLM chunks it)."""
    if not admitted:
        return 0, 0.0
    if padded:
        # Every row runs, and prefills, as long as the wave's longest member.
        lengths = [int(outputs[admitted].max())] * len(admitted)
        seated_prompts = [int(prompts[admitted].max())] * len(admitted)
    else:
        lengths = [int(outputs[r]) for r in admitted]
        seated_prompts = [int(prompts[r]) for r in admitted]
    for request, length, prompt in zip(admitted, lengths, seated_prompts, strict=True):
        trace.admit_step[request] = step
        trace.end_step[request] = step + length
        trace.context_offset[request] = prompt - step
        trace.slot[request] = heapq.heappop(free_rows)
        heapq.heappush(running, (step + length, request))
    return sum(seated_prompts), float(sum(p * (p + 1) / 2 for p in seated_prompts))


def _result(
    system: SystemName, batch_size: int, outputs: np.ndarray, prompts: np.ndarray, trace: _Trace
) -> ScheduleResult:
    """Expand the runs into per-step arrays and derive the throughput figures."""
    counts = np.asarray(trace.run_steps, dtype=np.int64)
    step_active = np.repeat(np.asarray(trace.run_active, dtype=np.int64), counts)
    step_duration = np.concatenate(trace.run_duration_s)
    num_steps = int(counts.sum())
    makespan = float(trace.finish_s.max())
    useful = int(outputs.sum())
    prompt_total = int(prompts.sum())
    busy_s = float(step_duration.sum())
    return ScheduleResult(
        system=system,
        batch_size=batch_size,
        makespan_s=makespan,
        num_steps=num_steps,
        step_active=step_active,
        step_duration_s=step_duration,
        admit_step=trace.admit_step,
        end_step=trace.end_step,
        slot=trace.slot,
        first_token_s=trace.first_token_s,
        finish_s=trace.finish_s,
        prompt_tokens=prompt_total,
        useful_token_slots=useful,
        generated_tokens=int((trace.end_step - trace.admit_step).sum()),
        total_token_slots=batch_size * num_steps,
        useful_fraction=useful / (batch_size * num_steps),
        output_tokens_per_s=useful / makespan,
        total_tokens_per_s=(prompt_total + useful) / makespan,
        mean_occupancy=float((step_active * step_duration).sum() / (batch_size * busy_s)),
        mean_occupancy_per_step=float(step_active.mean() / batch_size),
    )


def token_counts(name: str, values: Sequence[int] | np.ndarray, minimum: int) -> np.ndarray:
    """Validate a 1-D sequence of whole token counts, each at least `minimum`."""
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-D sequence of token counts")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name}: token counts must be integers, got dtype {array.dtype}")
    if array.min() < minimum:
        raise ValueError(f"{name}: every count must be at least {minimum}, got {int(array.min())}")
    return array.astype(np.int64)


def _arrivals(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Validate arrival offsets: finite seconds, none negative."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("arrivals: must be numbers of seconds") from None
    if array.ndim != 1 or not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError("arrivals: must be a 1-D sequence of finite, non-negative offsets in seconds")
    return array
