"""What one engine step costs: the interface the simulator asks, and the linear step cost.

A step's cost is asked for a run of consecutive steps in which the same `active`
sequences compute: the simulator passes the context of each of those steps (the sum,
over the step's sequences, of the tokens each attends to), the prompt tokens the run's
first step prefills (a run that prefills is one step long) and the (query, key) pairs
those prompt tokens attend over. Any class with
`step_seconds(active, context_tokens, prefill_tokens, prefill_pairs)` will do: `InterpolatedStepCost`
(batch size only) and `LinearStepCost` (fitted on engine steps by
harness.analysis.step_cost_fit) both have it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class StepCost(Protocol):
    """Seconds per engine step, given what the step computes."""

    def step_seconds(self, active: int, context_tokens: np.ndarray, prefill_tokens: int,
                     prefill_pairs: float = 0.0) -> np.ndarray:
        """Seconds of each step of a run of `active` sequences with the given contexts."""
        ...


@dataclass(frozen=True)
class LinearStepCost:
    """Step seconds = overhead + per sequence x active + per prefill token x prefill
    + per context token x context + per prefill pair x prefill pairs.

    Physically: a fixed cost per step (scheduling, launching the forward pass), a cost
    per sequence (its row through the weights, sampling, output handling), the prompt
    tokens computed in the step, attention reading every earlier token of every
    sequence, and the prompt tokens' attention over each other and what came before
    them, which grows with a prompt's square (a chunk of c prompt tokens after p
    computed ones: c*p + c*(c+1)/2 pairs). Every coefficient is zero or positive; the
    pair term is 0 where the steps fitted did not record their pairs.
    """

    overhead_s: float
    per_sequence_s: float
    per_prefill_token_s: float
    per_context_token_s: float
    per_prefill_pair_s: float = 0.0

    def __post_init__(self) -> None:
        for name, value in self.coefficients().items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be zero or positive and finite, got {value!r}")
        if self.overhead_s + self.per_sequence_s <= 0:
            raise ValueError("step cost: overhead_s and per_sequence_s are both zero, so a decode step would be free")

    def coefficients(self) -> dict[str, float]:
        """The constants by name, in the order of the formula."""
        return {
            "overhead_s": self.overhead_s,
            "per_sequence_s": self.per_sequence_s,
            "per_prefill_token_s": self.per_prefill_token_s,
            "per_context_token_s": self.per_context_token_s,
            "per_prefill_pair_s": self.per_prefill_pair_s,
        }

    def scaled(self, factor: float) -> LinearStepCost:
        """The same cost on a machine `factor` times slower per step (every coefficient times `factor`)."""
        return LinearStepCost(*(value * factor for value in self.coefficients().values()))

    def step_seconds(self, active: int, context_tokens: np.ndarray, prefill_tokens: int,
                     prefill_pairs: float = 0.0) -> np.ndarray:
        """Seconds of each step of a run of `active` sequences with the given contexts."""
        if active < 1:
            raise ValueError(f"active: a step needs at least one sequence, got {active}")
        fixed = (self.overhead_s + self.per_sequence_s * active + self.per_prefill_token_s * prefill_tokens
                 + self.per_prefill_pair_s * prefill_pairs)
        return fixed + self.per_context_token_s * np.asarray(context_tokens, dtype=float)
