"""Fit the step cost on the engine's own step log (steps.parquet).

Pure: steps tables in, constants out. What is fitted:
- A step's cost is the time from its start to the start of the next step, taken only
  while the engine had work left after it: requests still running. After a step that
  finished every running request, the next step waits on admission, not on compute:
  static mode's batch forming (up to its batch wait, hundreds of ms) or the client's
  next send. That cycle is the step's forward pass (t_s to end_s) plus the
  engine's bookkeeping before the next one (a few percent of a CPU step:
  docs/validation/reproduction.md); a makespan is made of whole cycles, so leaving the
  bookkeeping out would predict every run that much fast. The last step of a run, and steps after which the engine had
  nothing to do, have no measured cycle and are left out.
- Idle gaps (after a step that left no request running) are not step cost: they are
  waits for the client, or for a static batch to form. In naive runs they are its turnaround
  between waves, fitted separately as `mean_idle_gap`.
- The cost is linear with non-negative coefficients (step_cost.LinearStepCost),
  by least squares (scipy.optimize.nnls): least squares estimates the mean cost,
  and sums of steps (makespans) are what the fit must predict. Its features are the
  step's sequences, prompt tokens, context, and its prompt tokens' (query, key) pairs:
  without that last one a replay of long prompts fitted with R² 0.69 against 0.99 with
  it (docs/validation/trace-replay.md). Steps recorded before their pairs were are
  fitted without it (its coefficient 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from harness.paper.step_cost import LinearStepCost

# Each feature column of the fit, in the order of LinearStepCost's coefficients after
# the overhead.
_FEATURES = ("running", "prefill_tokens", "context_tokens", "prefill_pairs")


@dataclass(frozen=True, eq=False)
class StepSample:
    """Engine steps with a measured cost: per step its features and its seconds."""

    running: np.ndarray
    prefill_tokens: np.ndarray
    context_tokens: np.ndarray
    prefill_pairs: np.ndarray  # NaN for steps recorded before their pairs were
    seconds: np.ndarray

    @classmethod
    def concat(cls, samples: Sequence[StepSample]) -> StepSample:
        """All the steps of several samples as one."""
        return cls(*(np.concatenate([getattr(s, name) for s in samples]) for name in (*_FEATURES, "seconds")))

    def __len__(self) -> int:
        return len(self.seconds)

    @property
    def pairs_known(self) -> bool:
        """Whether every step recorded its prefill pairs (else the fit leaves that term out)."""
        return bool(np.isfinite(self.prefill_pairs).all())


@dataclass(frozen=True)
class StepCostFit:
    """The fitted cost and how well it explains the steps it was fitted on.

    r_squared is over single steps; residual_std_s is the spread of a single step's
    cost around the fit; mean_step_s sets it in scale. relative_sum_error is
    (predicted - measured) / measured of the summed cost of all the steps: what a
    makespan would see.
    """

    cost: LinearStepCost
    steps: int
    r_squared: float
    residual_std_s: float
    mean_step_s: float
    relative_sum_error: float


def busy_steps(steps: pd.DataFrame) -> StepSample:
    """The steps of one steps table whose cycle is measured (see the module docstring)."""
    ordered = steps.sort_values("t_s")
    cycle = ordered["t_s"].shift(-1) - ordered["t_s"]
    keep = (_work_left(ordered) & cycle.notna()).to_numpy()
    if "prefill_pairs" not in ordered:
        ordered = ordered.assign(prefill_pairs=math.nan)
    running, prefill_tokens, context_tokens, prefill_pairs = (ordered[name].to_numpy(dtype=float)[keep]
                                                              for name in _FEATURES)
    return StepSample(running, prefill_tokens, context_tokens, prefill_pairs, seconds=cycle.to_numpy(dtype=float)[keep])


def idle_gaps(steps: pd.DataFrame) -> np.ndarray:
    """Seconds from the end of each step that left the engine idle to the next step's start."""
    ordered = steps.sort_values("t_s")
    gap = ordered["t_s"].shift(-1) - ordered["end_s"]
    return gap.to_numpy(dtype=float)[(~_work_left(ordered) & gap.notna()).to_numpy()]


def mean_idle_gap(tables: Sequence[pd.DataFrame]) -> float:
    """Mean idle gap over the tables (the mean, because makespans add gaps up); 0 if none."""
    gaps = np.concatenate([idle_gaps(table) for table in tables]) if tables else np.array([])
    return float(gaps.mean()) if gaps.size else 0.0


class StepCostFitError(ValueError):
    """The steps given cannot fit a step cost: too few, or no decode cost in them."""


def fit_step_cost(sample: StepSample) -> StepCostFit:
    """Least squares with non-negative coefficients of step seconds on the step features.

    StepCostFitError when there are too few busy steps, or when the fit gives a decode step no
    cost at all (a few steps whose times the prompt and context features absorb): a step cost
    that prices decoding at zero would predict nonsense, so there is none.
    """
    columns = len(_FEATURES) + 1 if sample.pairs_known else len(_FEATURES)
    if len(sample) < columns:
        raise StepCostFitError(f"step cost fit: {len(sample)} busy steps, need at least {columns}")
    fitted, _ = nnls(_design(sample)[:, :columns], sample.seconds)
    coefficients = np.concatenate([fitted, np.zeros(len(_FEATURES) + 1 - columns)])
    try:
        cost = LinearStepCost(*(float(c) for c in coefficients))
    except ValueError as exc:
        raise StepCostFitError(f"step cost fit on {len(sample)} busy steps: {exc}") from None
    predicted = modelled_seconds(cost, sample)
    residual = sample.seconds - predicted
    total = float(np.sum((sample.seconds - sample.seconds.mean()) ** 2))
    return StepCostFit(
        cost=cost,
        steps=len(sample),
        r_squared=1.0 - float(np.sum(residual**2)) / total if total > 0 else math.nan,
        residual_std_s=float(residual.std()),
        mean_step_s=float(sample.seconds.mean()),
        relative_sum_error=float(predicted.sum() / sample.seconds.sum() - 1.0),
    )


def modelled_seconds(cost: LinearStepCost, sample: StepSample) -> np.ndarray:
    """What `cost` says each step of `sample` costs."""
    return np.asarray(_design(sample) @ np.array(list(cost.coefficients().values())), dtype=np.float64)


def _design(sample: StepSample) -> np.ndarray:
    """The features by step, the overhead's column first; unknown pairs as 0 (their coefficient is then 0)."""
    return np.column_stack([np.ones(len(sample)), sample.running, sample.prefill_tokens, sample.context_tokens,
                            np.nan_to_num(sample.prefill_pairs)])


def _work_left(ordered: pd.DataFrame) -> pd.Series:
    """Whether a request was still running after each step (waiting ones wait on admission, not compute)."""
    return ordered["running"] - ordered["finished"].map(len) > 0
