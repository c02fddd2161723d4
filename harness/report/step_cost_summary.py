"""The fitted step costs behind the report's predictions, as the report states them.

One summary per server: the constants fitted on its engine steps
(harness.analysis.step_predict.server_step_costs), how well they fit, and the client's
turnaround between naive waves.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.analysis.step_predict import ServerStepCost
from harness.paper.step_cost import LinearStepCost

# The context per sequence at which the report quotes a decode step when the runs have
# no engine steps to measure it from.
QUOTED_CONTEXT_PER_SEQUENCE = 128


class StepCostSummary(BaseModel):
    """One server's fitted step cost."""

    model_config = ConfigDict(extra="forbid")

    server: str = Field(description="which server (mode, pid, start time)")
    runs: int = Field(description="runs of that server the constants were fitted on")
    steps: int = Field(description="busy engine steps fitted")
    r_squared: float = Field(description="share of the variance of single step costs the fit explains")
    residual_std_s: float = Field(description="spread of a single step's cost around the fit")
    mean_step_s: float = Field(description="mean cost of a fitted step")
    overhead_s: float = Field(description="seconds per step")
    per_sequence_s: float = Field(description="seconds per sequence in the step")
    per_prefill_token_s: float = Field(description="seconds per prompt token prefilled in the step")
    per_context_token_s: float = Field(description="seconds per token attended to, over the step's sequences")
    per_prefill_pair_s: float = Field(0.0, description="seconds per (query, key) pair of the step's prompt tokens"
                                      " (0 in reports fitted before steps recorded them)")
    wave_gap_s: float = Field(
        description="engine idle between naive waves (the client's turnaround); 0 if no naive runs"
    )

    @classmethod
    def of(cls, step_cost: ServerStepCost) -> StepCostSummary:
        """Summarise one server's fitted step cost."""
        fit = step_cost.fit
        return cls(
            server=step_cost.server,
            runs=len(step_cost.fitted_on),
            steps=fit.steps,
            r_squared=fit.r_squared,
            residual_std_s=fit.residual_std_s,
            mean_step_s=fit.mean_step_s,
            wave_gap_s=step_cost.wave_gap_s,
            **fit.cost.coefficients(),
        )

    def cost(self) -> LinearStepCost:
        """The fitted constants as a step cost."""
        return LinearStepCost(self.overhead_s, self.per_sequence_s, self.per_prefill_token_s, self.per_context_token_s,
                              self.per_prefill_pair_s)

    def decode_step_s(self, sequences: int, context_per_sequence: float = QUOTED_CONTEXT_PER_SEQUENCE) -> float:
        """Seconds of a decode step of `sequences` sequences, each attending to `context_per_sequence` tokens."""
        return float(self.cost().step_seconds(sequences, np.array([sequences * context_per_sequence]), 0)[0])
