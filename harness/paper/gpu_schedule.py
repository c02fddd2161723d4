"""Predict how a vLLM engine on a GPU schedules a burst of requests, block by block.

What bounds the batch on a GPU, as vLLM 0.1 (the version Anyscale measured, June 2023)
does it; its scheduler and block manager are the reference for every rule here:
- KV capacity: the cache holds `kv_blocks` blocks of `block_size` tokens. A sequence
  holds ceil(tokens cached / block_size) blocks, and takes a new block when its next
  token starts one.
- Admission only while blocks are free: a waiting request is admitted, first come
  first served, only if its blocks fit and leave the watermark (1% of the blocks) free,
  only if the step's tokens stay within `max_num_batched_tokens` (each running
  sequence's decode token counts one), and only while fewer than `max_num_seqs` run.
  Admission stops at the first request that does not fit.
- Prefill and decode in the same step: every running sequence decodes one token and
  the admitted prompts are prefilled whole (no chunking) in one forward pass; the
  prefill produces each new sequence's first token.
- A full cache preempts: when a running sequence needs a new block and none is free,
  the most recently admitted running sequence is preempted by recompute (its blocks
  are freed, it goes to the front of the queue, and is later prefilled again over its
  prompt and the tokens it had generated). Nothing is swapped to CPU memory.
- static: the same engine, but a batch of up to `max_num_seqs` requests is formed only
  when the previous batch has fully finished, and only its members are admitted (the
  static scheduler plugin's rule; its members still wait for blocks like any request).
  With a batch wait, an idle static engine forms its batch only once `max_num_seqs`
  requests wait or the oldest has waited that long (the plugin's max batch delay); 0 is
  "impatient": whoever waits (Anyscale's static policy in their latency runs).

Requests arrive at their `arrivals` offsets (default: all at t=0, a burst); a request
joins the waiting queue at the first step that starts at or after its arrival, and an
engine with nothing to run idles until the next arrival. Each step costs what
`GpuStepCost` says of its StepWork; time is the sum of the steps and the idle waits.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.paper.gpu_cost import GpuStepCost, StepWork
from harness.paper.simulate import token_counts
from harness.systems import MODES, Mode

# An arrival within a nanosecond of a step's start counts as arrived by it, so float
# rounding in the accumulated clock cannot push an admission one step late.
_ARRIVAL_TOLERANCE_S = 1e-9


@dataclass(frozen=True)
class EngineLimits:
    """What bounds a vLLM engine's batch: KV blocks, sequences and tokens per step."""

    kv_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int = 16
    watermark: float = 0.01

    def __post_init__(self) -> None:
        for name in ("kv_blocks", "max_num_seqs", "max_num_batched_tokens", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        if not (math.isfinite(self.watermark) and 0 <= self.watermark < 1):
            raise ValueError(f"watermark: must be in [0, 1), got {self.watermark!r}")

    @property
    def watermark_blocks(self) -> int:
        """Blocks admission leaves free, so decoding sequences can grow before anything is preempted."""
        return int(self.watermark * self.kv_blocks)


@dataclass(frozen=True, eq=False)
class EngineSchedule:
    """The predicted schedule of one system on one burst of requests.

    Per-step arrays have one entry per step: its seconds, the sequences in it (decoding
    plus prefilling), the prompt tokens it prefilled (recomputed ones included) and
    whether compute rather than memory traffic set its time. Per-request arrays are in
    input order: its output tokens, and in seconds from t=0 its arrival, the start of the step that first admitted
    it, the end of that step (its first token) and the end of its last step.
    """

    system: Mode
    limits: EngineLimits
    makespan_s: float
    prompt_tokens: int
    output_tokens: int
    preemptions: int
    recomputed_tokens: int
    step_duration_s: np.ndarray
    step_sequences: np.ndarray
    step_prefill_tokens: np.ndarray
    step_compute_bound: np.ndarray
    output_lengths: np.ndarray
    arrival_s: np.ndarray
    admitted_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray

    @property
    def num_steps(self) -> int:
        """Forward passes run."""
        return len(self.step_duration_s)

    @property
    def total_tokens_per_s(self) -> float:
        """(prompt + generated tokens) / makespan: the Anyscale definition."""
        return (self.prompt_tokens + self.output_tokens) / self.makespan_s

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens / makespan."""
        return self.output_tokens / self.makespan_s

    @property
    def mean_sequences(self) -> float:
        """Sequences per step, weighted by step duration."""
        return float((self.step_sequences * self.step_duration_s).sum() / self.step_duration_s.sum())

    @property
    def prefill_step_share(self) -> float:
        """Share of steps that prefill a prompt (beside the decodes)."""
        return float((self.step_prefill_tokens > 0).mean())

    @property
    def prefill_time_share(self) -> float:
        """Share of the makespan spent in steps that prefill."""
        return float(self.step_duration_s[self.step_prefill_tokens > 0].sum() / self.makespan_s)

    @property
    def mean_prefill_tokens(self) -> float:
        """Prompt tokens per step that prefills."""
        prefilling = self.step_prefill_tokens[self.step_prefill_tokens > 0]
        return float(prefilling.mean()) if len(prefilling) else 0.0

    @property
    def compute_bound_time_share(self) -> float:
        """Share of the makespan in steps whose compute time exceeds their memory time."""
        return float(self.step_duration_s[self.step_compute_bound].sum() / self.makespan_s)


def simulate_engine(
    system: Mode,
    prompt_tokens: Sequence[int] | np.ndarray,
    output_tokens: Sequence[int] | np.ndarray,
    limits: EngineLimits,
    cost: GpuStepCost,
    arrivals: Sequence[float] | np.ndarray | None = None,
    static_batch_wait_s: float = 0.0,
) -> EngineSchedule:
    """Run the engine's schedule, step by step (rules in the module docstring).

    `arrivals`: each request's offset in seconds (None: a burst at t=0).
    `static_batch_wait_s`: static's max batch delay (ignored by continuous).
    Raises ValueError for a request that could never be admitted (its prompt and output
    would outgrow the token budget or the cache on their own), for arrivals that are not
    one finite, non-negative offset per request, or a negative batch wait.
    """
    if system not in MODES:
        raise ValueError(f"system: must be one of {', '.join(MODES)}, got {system!r}")
    prompts = token_counts("prompt_tokens", prompt_tokens, minimum=1)
    outputs = token_counts("output_tokens", output_tokens, minimum=1)
    if len(prompts) != len(outputs):
        raise ValueError(f"prompt_tokens: has {len(prompts)} entries, output_tokens has {len(outputs)}")
    times = np.zeros(len(prompts)) if arrivals is None else np.asarray(arrivals, dtype=float)
    if times.shape != prompts.shape or not np.all(np.isfinite(times)) or np.any(times < 0):
        raise ValueError(f"arrivals: must be {len(prompts)} finite, non-negative offsets in seconds")
    if not (math.isfinite(static_batch_wait_s) and static_batch_wait_s >= 0):
        raise ValueError(f"static_batch_wait_s: must be zero or positive seconds, got {static_batch_wait_s!r}")
    _check_fits(prompts, outputs, limits)
    static = system == "static"
    run = _EngineRun(prompts, outputs, limits, cost, times, static_batch_wait_s if static else None)
    run.play()
    durations = np.asarray(run.durations)
    return EngineSchedule(
        system=system,
        limits=limits,
        makespan_s=run.clock,
        prompt_tokens=int(prompts.sum()),
        output_tokens=int(outputs.sum()),
        preemptions=run.preemptions,
        recomputed_tokens=run.recomputed_tokens,
        step_duration_s=durations,
        step_sequences=np.asarray(run.sequences, dtype=np.int64),
        step_prefill_tokens=np.asarray(run.prefill_tokens, dtype=np.int64),
        step_compute_bound=np.asarray(run.compute_bound, dtype=bool),
        output_lengths=outputs,
        arrival_s=times,
        admitted_s=run.admitted_s,
        first_token_s=run.first_token_s,
        finish_s=run.finish_s,
    )


class _EngineRun:
    """The event loop's state: who has yet to arrive, who waits, who runs, what each holds; and the step log."""

    def __init__(
        self, prompts: np.ndarray, outputs: np.ndarray, limits: EngineLimits, cost: GpuStepCost,
        arrivals: np.ndarray, static_batch_wait_s: float | None,
    ) -> None:
        self.outputs, self.limits, self.cost, self.arrivals = outputs, limits, cost, arrivals
        # None: continuous; otherwise static, with its max batch delay.
        self.static_batch_wait_s = static_batch_wait_s
        self.length = prompts.copy()  # tokens so far: prompt + generated
        self.generated = np.zeros(len(prompts), dtype=np.int64)
        self.held = np.zeros(len(prompts), dtype=np.int64)  # KV blocks held
        self.free = limits.kv_blocks
        self.running: list[int] = []  # in admission order: the last is preempted first
        self.future: deque[int] = deque(int(i) for i in np.argsort(arrivals, kind="stable"))
        self.waiting: deque[int] = deque()  # may be admitted
        # Static: arrived, waiting for the next batch to be formed; continuous admits from `waiting` directly.
        self.backlog: deque[int] = deque()
        self.clock = 0.0
        self.preemptions = self.recomputed_tokens = 0
        self.durations: list[float] = []
        self.sequences: list[int] = []
        self.prefill_tokens: list[int] = []
        self.compute_bound: list[bool] = []
        self.admitted_s = np.full(len(prompts), np.nan)
        self.first_token_s = np.full(len(prompts), np.nan)
        self.finish_s = np.full(len(prompts), np.nan)

    def play(self) -> None:
        while self.running or self.waiting or self.backlog or self.future:
            self._arrive()
            if self.static_batch_wait_s is not None and not self.running and not self.waiting:
                self._form_static_batch()
            if not self.running and not self.waiting:
                # Idle until the next arrival.
                self.clock = max(self.clock, float(self.arrivals[self.future[0]]))
                continue
            preempted = self._grow_running()
            decoding = list(self.running)
            admitted = self._admit(preempted)
            self._step(decoding, admitted)

    def _arrive(self) -> None:
        """Queue every request that has arrived by the clock."""
        queue = self.waiting if self.static_batch_wait_s is None else self.backlog
        while self.future and self.arrivals[self.future[0]] <= self.clock + _ARRIVAL_TOLERANCE_S:
            queue.append(self.future.popleft())

    def _form_static_batch(self) -> None:
        """Form the next static batch: at once when it is full, else once its oldest has waited the batch wait."""
        assert self.static_batch_wait_s is not None
        width = self.limits.max_num_seqs
        if not self.backlog:
            return
        if len(self.backlog) < width and self.static_batch_wait_s > 0:
            missing = width - len(self.backlog)
            full_at = float(self.arrivals[self.future[missing - 1]]) if len(self.future) >= missing else math.inf
            oldest_waited = float(self.arrivals[self.backlog[0]]) + self.static_batch_wait_s
            self.clock = max(self.clock, min(full_at, oldest_waited))
            self._arrive()
        for _ in range(min(width, len(self.backlog))):
            self.waiting.append(self.backlog.popleft())

    def _blocks_for(self, tokens: np.ndarray | int) -> np.ndarray | int:
        return -(-tokens // self.limits.block_size)

    def _grow_running(self) -> set[int]:
        """Give each running sequence the block its next token needs, preempting from the back."""
        if not self.running:
            return set()
        index = np.asarray(self.running)
        need = self._blocks_for(self.length[index]) - self.held[index]
        if int(need.sum()) <= self.free:
            self.held[index] += need
            self.free -= int(need.sum())
            return set()
        preempted: set[int] = set()
        queue, kept = deque(self.running), []
        while queue:
            request = queue.popleft()
            need_one = int(self._blocks_for(int(self.length[request]))) - int(self.held[request])
            while need_one > self.free and queue:
                victim = queue.pop()
                self._preempt(victim)
                preempted.add(victim)
            if need_one > self.free:
                self._preempt(request)
                preempted.add(request)
                continue
            self.held[request] += need_one
            self.free -= need_one
            kept.append(request)
        self.running = kept
        return preempted

    def _preempt(self, request: int) -> None:
        self.free += int(self.held[request])
        self.held[request] = 0
        self.waiting.appendleft(request)
        self.preemptions += 1
        self.recomputed_tokens += int(self.length[request])

    def _admit(self, preempted: set[int]) -> list[int]:
        """Admit waiting requests in order while blocks, budget and sequence slots allow."""
        limits = self.limits
        budget = len(self.running)
        admitted: list[int] = []
        while self.waiting and len(self.running) < limits.max_num_seqs:
            request = self.waiting[0]
            if request in preempted:
                break
            tokens = int(self.length[request])
            blocks = int(self._blocks_for(tokens))
            if self.free - blocks < limits.watermark_blocks or budget + tokens > limits.max_num_batched_tokens:
                break
            self.waiting.popleft()
            self.held[request] = blocks
            self.free -= blocks
            self.running.append(request)
            admitted.append(request)
            budget += tokens
        if not self.running:
            raise RuntimeError("engine schedule: nothing runs and nothing can be admitted")
        return admitted

    def _step(self, decoding: list[int], admitted: list[int]) -> None:
        """Cost one forward pass, then every sequence in it gains a token and the finished leave."""
        prompts = self.length[admitted]
        work = StepWork(
            decode_sequences=len(decoding),
            decode_context_tokens=int(self.length[decoding].sum()),
            prefill_sequences=len(admitted),
            prefill_tokens=int(prompts.sum()),
            prefill_attention_pairs=int((prompts * (prompts + 1) // 2).sum()),
        )
        terms = self.cost.terms(work)
        if admitted:
            first = np.asarray(admitted)
            first = first[np.isnan(self.admitted_s[first])]  # a preempted request keeps its first admission
            self.admitted_s[first] = self.clock
            self.first_token_s[first] = self.clock + terms.seconds
        self.clock += terms.seconds
        self.durations.append(terms.seconds)
        self.sequences.append(len(self.running))
        self.prefill_tokens.append(work.prefill_tokens)
        self.compute_bound.append(terms.compute_bound)
        index = np.asarray(self.running)
        self.length[index] += 1
        self.generated[index] += 1
        done = self.generated[index] == self.outputs[index]
        if done.any():
            self.finish_s[index[done]] = self.clock
            self.free += int(self.held[index[done]].sum())
            self.held[index[done]] = 0
            self.running = index[~done].tolist()


def _check_fits(prompts: np.ndarray, outputs: np.ndarray, limits: EngineLimits) -> None:
    """Refuse a request whose prompt plus all but its last token could not be prefilled at once.

    A preempted request is prefilled again over everything it has, so the longest it can
    be re-admitted with must fit the token budget and the cache above the watermark.
    """
    longest = int((prompts + outputs - 1).max())
    if longest > limits.max_num_batched_tokens:
        raise ValueError(
            f"max_num_batched_tokens: {limits.max_num_batched_tokens} is below the longest request "
            f"({longest} tokens of prompt and output)"
        )
    room = (limits.kv_blocks - limits.watermark_blocks) * limits.block_size
    if longest > room:
        raise ValueError(f"kv cache: {room} tokens above the watermark cannot hold the longest request ({longest})")

