"""Throughput at one machine speed: each run's busy time re-costed by one step cost.

On a shared VM the same schedule runs faster or slower by several percent from one run to
the next (the same engine steps, the same occupancy, other step times:
docs/validation/reproduction.md), which no number of repetitions averages away cheaply.
To separate the scheduler from the machine, one step cost (step_cost_fit) is fitted on
the busy steps of every run that has an engine log, whatever its server: both modes run
the same engine code on the same machine, so one price list is fair to both. Then, per run:

- modelled busy time: what the step cost says the run's own busy steps cost;
- speed = measured busy time / modelled busy time (> 1: the machine ran slow);
- normalised makespan = makespan - measured busy time + modelled busy time: the idle
  gaps (a naive wave's turnaround, a burst's ramp-in) stay as measured;
- normalised total tok/s = the run's (prompt + useful) tokens / normalised makespan.

What it is: the real schedule each system produced, priced at one speed. What it is
not: a measurement of the machine; where the step cost misprices a kind of step, the
normalised figures inherit that (its accuracy is checked per cell by
benchmarks/step_cost_accuracy.py). Pure, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from harness.analysis.step_cost_fit import (
    StepCostFit,
    StepCostFitError,
    StepSample,
    busy_steps,
    fit_step_cost,
    modelled_seconds,
)
from harness.paper.step_cost import LinearStepCost

# Fewer busy steps than this across all runs: no common step cost, no normalised figures.
MIN_STEPS = 100


@dataclass(frozen=True)
class SpeedNormalised:
    """One run at the common speed."""

    speed: float
    total_tok_s: float


@dataclass(frozen=True)
class RunTiming:
    """What normalising a run needs: its steps, makespan and (prompt + useful) tokens."""

    steps: pd.DataFrame
    makespan_s: float
    tokens: float


def busy_seconds(sample: StepSample, cost: LinearStepCost) -> tuple[float, float]:
    """(measured, modelled): the busy steps' own seconds, and what `cost` says they cost."""
    return float(sample.seconds.sum()), float(modelled_seconds(cost, sample).sum())


def machine_speed(steps: pd.DataFrame, cost: LinearStepCost) -> float:
    """How much slower than `cost` the busy steps of `steps` ran (1: as priced; > 1: slower; NaN: no busy step)."""
    measured, modelled = busy_seconds(busy_steps(steps), cost)
    return measured / modelled if modelled > 0 else math.nan


def normalise(runs: Mapping[str, RunTiming]) -> tuple[StepCostFit | None, dict[str, SpeedNormalised]]:
    """The common step cost fit and each run's figures at its speed (runs without steps are left out)."""
    samples = {run_id: busy_steps(run.steps) for run_id, run in runs.items() if not run.steps.empty}
    samples = {run_id: sample for run_id, sample in samples.items() if len(sample)}
    if sum(len(sample) for sample in samples.values()) < MIN_STEPS:
        return None, {}
    try:
        fit = fit_step_cost(StepSample.concat(list(samples.values())))
    except StepCostFitError:
        return None, {}
    figures = {}
    for run_id, sample in samples.items():
        measured, modelled = busy_seconds(sample, fit.cost)
        run = runs[run_id]
        makespan = run.makespan_s - measured + modelled
        figures[run_id] = SpeedNormalised(
            speed=measured / modelled if modelled > 0 else math.nan,
            total_tok_s=run.tokens / makespan if makespan > 0 else math.nan,
        )
    return fit, figures
