"""What one engine step costs on a GPU, from the hardware card alone.

A step's seconds are max(memory time, compute time) + a fixed per-step overhead:
- memory time: every weight is read once, plus the KV cache of every decoding
  sequence's context, over the card's bandwidth;
- compute time: the step's FLOPs over peak FLOP/s x one efficiency factor. A token
  (prefill or decode) multiplies every weight of the layers once (2 FLOPs per weight);
  the LM head runs once per sequence, on its last token only (vLLM samples one token
  per sequence); attention costs 4 x layers x heads x head_dim FLOPs per (query, key)
  pair: a decode token attends to its whole context, a prompt of n tokens to
  n(n+1)/2 pairs (causal).

The constants (efficiency, overhead) are given by the caller with their sources
(harness.paper.gpu_setups); nothing here is fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.paper.physics import GpuSpec, ModelShape, embedding_parameters, kv_bytes_per_token

# One step's figure, or an array of them (one per step of a run).
Count = int | np.ndarray
Seconds = float | np.ndarray


@dataclass(frozen=True)
class StepWork:
    """What one engine step computes.

    `decode_context_tokens` is the sum, over the decoding sequences, of the tokens each
    attends to (its KV cache read in the step); `prefill_attention_pairs` the sum over
    the prompts prefilled of n(n+1)/2.
    """

    decode_sequences: int
    decode_context_tokens: int
    prefill_sequences: int
    prefill_tokens: int
    prefill_attention_pairs: int

    def __post_init__(self) -> None:
        for name in ("decode_sequences", "decode_context_tokens", "prefill_sequences", "prefill_tokens",
                     "prefill_attention_pairs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name}: must be a non-negative integer, got {value!r}")
        if self.decode_sequences + self.prefill_sequences == 0:
            raise ValueError("step work: a step needs at least one sequence")
        if (self.prefill_sequences == 0) != (self.prefill_tokens == 0):
            raise ValueError("step work: prefill_tokens and prefill_sequences must be both zero or both positive")


@dataclass(frozen=True)
class StepCostTerms:
    """The two roofline terms of one step and the overhead added to the larger."""

    memory_s: float
    compute_s: float
    overhead_s: float

    @property
    def seconds(self) -> float:
        """Wall seconds of the step."""
        return max(self.memory_s, self.compute_s) + self.overhead_s

    @property
    def compute_bound(self) -> bool:
        """Whether compute, not memory traffic, sets the step's time."""
        return self.compute_s > self.memory_s


@dataclass(frozen=True)
class GpuStepCost:
    """Seconds per engine step of `model` on `gpu`, with one efficiency and one overhead.

    `bandwidth_scale` and `flops_scale` multiply the card's figures (1.0 = the card):
    the sensitivity table varies them, nothing else should.
    """

    model: ModelShape
    gpu: GpuSpec
    efficiency: float
    overhead_s: float = 0.0
    bandwidth_scale: float = 1.0
    flops_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.efficiency) and 0 < self.efficiency <= 1):
            raise ValueError(f"efficiency: must be in (0, 1], got {self.efficiency!r}")
        if not (math.isfinite(self.overhead_s) and self.overhead_s >= 0):
            raise ValueError(f"overhead_s: must be zero or positive seconds, got {self.overhead_s!r}")
        for name in ("bandwidth_scale", "flops_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be positive, got {value!r}")

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights read by every step."""
        return self.model.num_parameters * self.model.dtype_bytes

    @property
    def layer_flops_per_token(self) -> float:
        """2 FLOPs per weight that every token multiplies: all but the lookup tables and the LM head.

        A tied LM head is the token embedding, counted once among the parameters.
        """
        untied_head = 0 if self.model.tie_word_embeddings else self._lm_head_parameters
        return 2.0 * (self.model.num_parameters - embedding_parameters(self.model) - untied_head)

    @property
    def lm_head_flops_per_sequence(self) -> float:
        """2 FLOPs per LM-head weight, once per sequence per step."""
        return 2.0 * self._lm_head_parameters

    @property
    def attention_flops_per_pair(self) -> float:
        """QK^T and AV: 2 x 2 FLOPs per head dimension, per head, per layer, per (query, key) pair."""
        return 4.0 * self.model.num_layers * self.model.num_attention_heads * self.model.head_dim

    def terms(self, work: StepWork) -> StepCostTerms:
        """The memory and compute terms of one step."""
        memory_s, compute_s = self._terms(
            work.decode_sequences, work.decode_context_tokens, work.prefill_sequences, work.prefill_tokens,
            work.prefill_attention_pairs,
        )
        return StepCostTerms(float(memory_s), float(compute_s), self.overhead_s)

    def seconds(self, work: StepWork) -> float:
        """Wall seconds of one step."""
        return self.terms(work).seconds

    def step_seconds(self, active: int, context_tokens: np.ndarray, prefill_tokens: int,
                     prefill_pairs: float = 0.0) -> np.ndarray:
        """Seconds of each step of a run, as harness.paper.simulate asks (step_cost.StepCost).

        That simulator hands over only sums, so a step that prefills is read as a wave's
        admission step: every one of its `active` sequences is new and prefills an equal
        share of `prefill_tokens` (its own prompt attention priced from that share, so
        `prefill_pairs` is not read). That is exact for naive and static waves; a continuous
        schedule on a GPU goes through harness.paper.gpu_schedule, which passes
        StepWork itself.
        """
        if active < 1:
            raise ValueError(f"active: a step needs at least one sequence, got {active}")
        contexts = np.asarray(context_tokens, dtype=np.int64)
        if prefill_tokens > 0:
            prompt = prefill_tokens // active
            work = StepWork(0, 0, active, int(prefill_tokens), active * prompt * (prompt + 1) // 2)
            return np.full(len(contexts), self.seconds(work))
        memory_s, compute_s = self._terms(active, contexts, 0, 0, 0)
        return np.maximum(memory_s, compute_s) + self.overhead_s

    def _terms(
        self, decode_sequences: int, decode_context: Count, prefill_sequences: int, prefill_tokens: int, pairs: int
    ) -> tuple[Seconds, Seconds]:
        """(memory seconds, compute seconds); one step's, or an array of them for an array of contexts."""
        bandwidth = self.gpu.memory_bandwidth_bytes_per_s * self.bandwidth_scale
        memory_s = (self.weight_bytes + kv_bytes_per_token(self.model) * decode_context) / bandwidth
        flops = (
            self.layer_flops_per_token * (decode_sequences + prefill_tokens)
            + self.lm_head_flops_per_sequence * (decode_sequences + prefill_sequences)
            + self.attention_flops_per_pair * (decode_context + pairs)
        )
        return memory_s, flops / (self.gpu.peak_flops * self.flops_scale * self.efficiency)

    @property
    def _lm_head_parameters(self) -> int:
        return self.model.vocab_size * self.model.hidden_size
