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

All requests arrive at t=0 (a burst). Each step costs what `GpuStepCost` says of its
StepWork; time is the sum of the steps.
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
    whether compute rather than memory traffic set its time.
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
) -> EngineSchedule:
    """Run the engine's schedule of a burst, step by step (rules in the module docstring).

    Raises ValueError for a request that could never be admitted: its prompt and output
    would outgrow the token budget or the cache on their own.
    """
    if system not in MODES:
        raise ValueError(f"system: must be one of {', '.join(MODES)}, got {system!r}")
    prompts = token_counts("prompt_tokens", prompt_tokens, minimum=1)
    outputs = token_counts("output_tokens", output_tokens, minimum=1)
    if len(prompts) != len(outputs):
        raise ValueError(f"prompt_tokens: has {len(prompts)} entries, output_tokens has {len(outputs)}")
    _check_fits(prompts, outputs, limits)
    run = _EngineRun(prompts, outputs, limits, cost, system == "static")
    run.play()
    durations = np.asarray(run.durations)
    return EngineSchedule(
        system=system,
        limits=limits,
        makespan_s=float(durations.sum()),
        prompt_tokens=int(prompts.sum()),
        output_tokens=int(outputs.sum()),
        preemptions=run.preemptions,
        recomputed_tokens=run.recomputed_tokens,
        step_duration_s=durations,
        step_sequences=np.asarray(run.sequences, dtype=np.int64),
        step_prefill_tokens=np.asarray(run.prefill_tokens, dtype=np.int64),
        step_compute_bound=np.asarray(run.compute_bound, dtype=bool),
    )


class _EngineRun:
    """The event loop's state: who waits, who runs, what each holds; and the step log."""

    def __init__(
        self, prompts: np.ndarray, outputs: np.ndarray, limits: EngineLimits, cost: GpuStepCost, static: bool
    ) -> None:
        self.outputs, self.limits, self.cost, self.static = outputs, limits, cost, static
        self.length = prompts.copy()  # tokens so far: prompt + generated
        self.generated = np.zeros(len(prompts), dtype=np.int64)
        self.held = np.zeros(len(prompts), dtype=np.int64)  # KV blocks held
        self.free = limits.kv_blocks
        self.running: list[int] = []  # in admission order: the last is preempted first
        requests = deque(range(len(prompts)))
        # A static engine admits only the current batch's members; the rest wait behind it.
        self.waiting: deque[int] = deque() if static else requests
        self.backlog: deque[int] = requests if static else deque()
        self.preemptions = self.recomputed_tokens = 0
        self.durations: list[float] = []
        self.sequences: list[int] = []
        self.prefill_tokens: list[int] = []
        self.compute_bound: list[bool] = []

    def play(self) -> None:
        while self.running or self.waiting or self.backlog:
            if self.static and not self.running and not self.waiting:
                for _ in range(min(self.limits.max_num_seqs, len(self.backlog))):
                    self.waiting.append(self.backlog.popleft())
            preempted = self._grow_running()
            decoding = list(self.running)
            admitted = self._admit(preempted)
            self._step(decoding, admitted)

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
        self.durations.append(terms.seconds)
        self.sequences.append(len(self.running))
        self.prefill_tokens.append(work.prefill_tokens)
        self.compute_bound.append(terms.compute_bound)
        index = np.asarray(self.running)
        self.length[index] += 1
        self.generated[index] += 1
        done = self.generated[index] == self.outputs[index]
        if done.any():
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

