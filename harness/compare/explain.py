"""What changed between builds A and B, read from the engine's step logs. Pure, no I/O.

Each side gives one steps table per repetition (records.STEP_FIELDS columns, as
harness.analysis.engine reads them), all of one workload and system. Each figure is taken
per run, then its median across the side's repetitions, so one disturbed run does not move it.

A run's makespan is its steps times their mean time plus the idle time between steps, so
log(makespan B/A) = log(steps B/A) + log(mean step time B/A) + the rest, the rest being the
change in idle time (and what taking medians separately leaves over). The summary names the
largest of the three parts, and what in the batches goes with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from harness.analysis.engine import engine_metrics, step_seconds

# A figure within this share of A's is unchanged. It sits below the regression threshold
# (statistics.DEFAULT_THRESHOLD), so any drop the verdict can call has a cause named.
CHANGE = 0.01


@dataclass(frozen=True)
class StepFigures:
    """One side's step-log figures, each the median across its repetitions."""

    # Engine steps per run.
    steps: float
    # Mean seconds per step (harness.analysis.engine.step_seconds: overlap under a batch queue counted once).
    step_seconds: float
    # Requests admitted per step that admits any.
    admitted_per_step: float
    # Prefill tokens per step that computes any.
    prefill_per_step: float
    # Requests running per step: the batch width.
    running: float
    # The engine window (harness.analysis.engine.engine_metrics).
    makespan_seconds: float


@dataclass(frozen=True)
class MakespanSplit:
    """log(makespan B/A) as the sum of its parts, in natural logs (exp(part) - 1 is that part's change)."""

    total: float
    steps: float
    step_time: float
    # The rest: idle time between steps.
    idle: float


@dataclass(frozen=True)
class StepChange:
    """How B's engine steps differ from A's, and the dominant cause in one sentence."""

    a: StepFigures
    b: StepFigures
    # Each of B's figures over A's (NaN where A's is not finite and > 0).
    ratio: StepFigures
    split: MakespanSplit
    summary: str


def explain(a_steps: Sequence[pd.DataFrame], b_steps: Sequence[pd.DataFrame]) -> StepChange:
    """Compare B's step logs with A's, one steps table per repetition of each side.

    ValueError if a side has no repetitions or a repetition has no steps.
    """
    a, b = _side("A", a_steps), _side("B", b_steps)
    ratio = StepFigures(**{f.name: _ratio(getattr(b, f.name), getattr(a, f.name)) for f in fields(StepFigures)})
    total, steps, step_time = (_log(r) for r in (ratio.makespan_seconds, ratio.steps, ratio.step_seconds))
    split = MakespanSplit(total=total, steps=steps, step_time=step_time, idle=total - steps - step_time)
    return StepChange(a=a, b=b, ratio=ratio, split=split, summary=_summary(a, b, ratio, split))


def _side(name: str, runs: Sequence[pd.DataFrame]) -> StepFigures:
    if not runs:
        raise ValueError(f"side {name} has no repetitions")
    figures = [_run_figures(name, steps) for steps in runs]
    return StepFigures(
        **{f.name: float(np.median([getattr(run, f.name) for run in figures])) for f in fields(StepFigures)}
    )


def _run_figures(name: str, steps: pd.DataFrame) -> StepFigures:
    if steps.empty:
        raise ValueError(f"a repetition of side {name} has no engine steps")
    # engine_metrics owns the engine window; the batch size only scales its occupancy, not read here.
    metrics = engine_metrics(steps, batch_size=1)
    return StepFigures(
        steps=float(metrics.steps),
        step_seconds=float(np.mean(step_seconds(steps))),
        admitted_per_step=_mean_of_positive(steps["admitted"].map(len).to_numpy(dtype=float)),
        prefill_per_step=_mean_of_positive(steps["prefill_tokens"].to_numpy(dtype=float)),
        running=float(steps["running"].mean()),
        makespan_seconds=metrics.makespan_s,
    )


def _mean_of_positive(values: np.ndarray) -> float:
    positive = values[values > 0]
    return float(positive.mean()) if positive.size else math.nan


def _ratio(b: float, a: float) -> float:
    return b / a if math.isfinite(a) and a > 0 else math.nan


def _log(ratio: float) -> float:
    return math.log(ratio) if ratio > 0 else math.nan


def _changed(ratio: float) -> bool:
    # NaN (a figure one side lacks) compares false: no change is claimed from it.
    return abs(ratio - 1.0) > CHANGE


def _summary(a: StepFigures, b: StepFigures, ratio: StepFigures, split: MakespanSplit) -> str:
    parts = {"steps": split.steps, "step time": split.step_time, "idle": split.idle}
    cause, size = max(parts.items(), key=lambda part: abs(part[1]) if math.isfinite(part[1]) else -1.0)
    if _changed(math.exp(size)):
        if cause == "steps":
            return _more_steps(a, b, ratio)
        if cause == "step time":
            return _slower_steps(a, b, ratio)
        return (f"B's engine sits {'longer' if size > 0 else 'less'} idle between steps: its makespan is "
                f"{_pct(math.exp(size))} {'longer' if size > 0 else 'shorter'} than its steps and step time "
                "account for, so the change lies outside the steps (front end, client or scheduling gaps)")
    batches = _batch_changes(a, b, ratio)
    if batches:
        return (f"B's steps, step time and idle time match A's within {CHANGE:.0%}, though "
                f"{' and '.join(batches)}")
    return f"no change beyond {CHANGE:.0%} in steps, step time, idle time, batch width, admissions or prefill"


def _more_steps(a: StepFigures, b: StepFigures, ratio: StepFigures) -> str:
    more = "more" if ratio.steps > 1 else "fewer"
    head = f"B makes {_pct(ratio.steps)} {more} steps"
    if _changed(ratio.running):
        width = "wider" if ratio.running > 1 else "narrower"
        return (f"{head} of {width} batches ({b.running:.1f} against {a.running:.1f} requests a step): "
                "it admits differently")
    if _changed(ratio.admitted_per_step):
        return (f"{head} at the same batch width, admitting {b.admitted_per_step:.1f} requests per admitting step "
                f"against {a.admitted_per_step:.1f}: it admits differently")
    if _changed(ratio.prefill_per_step):
        return (f"{head}, computing {b.prefill_per_step:.0f} prompt tokens per prefill step against "
                f"{a.prefill_per_step:.0f}: it splits prompts differently")
    return f"{head} of the same batches: its requests take {more} steps to finish"


def _slower_steps(a: StepFigures, b: StepFigures, ratio: StepFigures) -> str:
    slower = ratio.step_seconds > 1
    head = f"B's engine steps take {_pct(ratio.step_seconds)} {'longer' if slower else 'less time'}"
    if _changed(ratio.steps):
        head += f", and it makes {_pct(ratio.steps)} {'more' if ratio.steps > 1 else 'fewer'} steps"
    else:
        head += " with the same number of steps"
    if _changed(ratio.running):
        width = "wider" if ratio.running > 1 else "narrower"
        return (f"{head}, of {width} batches ({b.running:.1f} against {a.running:.1f} requests a step): each step "
                f"carries {'more' if ratio.running > 1 else 'less'} work")
    # Interleaved pairs cancel a steady drift, not every move of the machine's speed: one build against itself
    # read 4.1% faster steps over 3 pairs (docs/validation/verdict.md).
    pace = "slower" if slower else "faster"
    return f"{head}: B's server is {pace} per step (its build, or the machine during its runs)"


def _batch_changes(a: StepFigures, b: StepFigures, ratio: StepFigures) -> list[str]:
    """What moved in the batches while the makespan's parts held."""
    changes = []
    if _changed(ratio.running):
        changes.append(f"its batches hold {b.running:.1f} requests against {a.running:.1f}")
    if _changed(ratio.admitted_per_step):
        changes.append(f"it admits {b.admitted_per_step:.1f} requests per admitting step against "
                       f"{a.admitted_per_step:.1f}")
    if _changed(ratio.prefill_per_step):
        changes.append(f"it computes {b.prefill_per_step:.0f} prompt tokens per prefill step against "
                       f"{a.prefill_per_step:.0f}")
    return changes


def _pct(ratio: float) -> str:
    return f"{abs(ratio - 1):.1%}"
