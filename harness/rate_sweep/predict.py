"""Each Poisson run's latency predicted from the engine steps of the same server's other runs.

The step cost is fitted as the throughput predictions fit it (harness.analysis.step_predict):
on the server's runs other than the one predicted (its burst and its other rates), so a
rate is predicted without its own run. The schedule simulator (harness.paper.simulate)
replays the run's plan, its arrival times included, under that step cost and, for static,
the server's max batch delay. A request's predicted E2E is its simulated finish minus its
arrival; the client's own overhead (HTTP, tokenising, streaming) is not in it.

The machine's speed moves from run to run on a shared VM (docs/validation/rate-sweep.md),
which no fit on other runs can know. So each prediction also says how fast the run's own steps were
against the fit (`run_speed`: the measured window's busy steps, their measured seconds over
what the held-out cost says they cost) and what the simulator predicts at that speed. That
second figure uses one number from the run itself, never its latencies: where it agrees with
the measurement and the held-out one does not, the miss was the machine's speed, not the
schedule.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.gap import simulate_plan
from harness.analysis.speed import machine_speed
from harness.analysis.step_cost_fit import StepCostFitError
from harness.analysis.step_predict import fit_server_step_cost, runs_by_server
from harness.paper.step_cost import LinearStepCost
from harness.rundir.reader import RunData
from harness.systems import OPEN_LOOP_ARRIVALS


@dataclass(frozen=True)
class PredictedPoint:
    """A run's predicted median latencies, seconds (requests arriving after the warm-up)."""

    e2e_p50_s: float
    ttft_p50_s: float
    fitted_on: tuple[str, ...]  # the runs whose steps the step cost was fitted on
    run_speed: float = math.nan  # the run's measured-window steps: measured seconds over the fit's (>1: slower)
    e2e_p50_at_run_speed_s: float = math.nan  # the same simulation with the step cost scaled by run_speed


def predict_points(runs: Sequence[RunData], warmup_s: float,
                   static_batch_wait_s: float | None) -> dict[str, PredictedPoint]:
    """Predictions by run_id for every open-loop run (Poisson, a trace) with engine steps and a plan.

    A server with a single run has nothing to hold out and gets no prediction.
    """
    predicted: dict[str, PredictedPoint] = {}
    for members in runs_by_server(runs).values():
        for run in members:
            if run.manifest.arrival_kind not in OPEN_LOOP_ARRIVALS:
                continue
            others = [other for other in members if other is not run]
            with contextlib.suppress(StepCostFitError, ValueError):
                cost = fit_server_step_cost(others)
                predicted[run.manifest.run_id] = _predict(run, cost.fit.cost, warmup_s, static_batch_wait_s or 0.0,
                                                          cost.fitted_on)
    return predicted


def _predict(run: RunData, step_cost: LinearStepCost, warmup_s: float, batch_wait_s: float,
             fitted_on: tuple[str, ...]) -> PredictedPoint:
    assert run.plan is not None, "predict_points keeps only runs with a plan"
    requests = run.plan["requests"]
    arrivals = np.array([request["arrival_s"] for request in requests], dtype=float)
    measured = arrivals >= warmup_s

    def simulated(cost: LinearStepCost) -> tuple[float, float]:
        schedule = simulate_plan(requests, run.manifest.batch_size, run.manifest.system, cost,
                                 static_batch_wait_s=batch_wait_s)
        if schedule is None or not measured.any():
            return math.nan, math.nan
        return (float(np.median(schedule.finish_s[measured] - arrivals[measured])),
                float(np.median(schedule.first_token_s[measured] - arrivals[measured])))

    e2e, ttft = simulated(step_cost)
    speed = _run_speed(run, step_cost, warmup_s)
    at_speed = simulated(step_cost.scaled(speed))[0] if math.isfinite(speed) else math.nan
    return PredictedPoint(e2e, ttft, fitted_on, speed, at_speed)


def _run_speed(run: RunData, step_cost: LinearStepCost, warmup_s: float) -> float:
    """Measured over modelled busy seconds of the run's steps from the end of its warm-up (NaN: none)."""
    assert run.steps is not None, "predict_points keeps only runs with engine steps"
    start = float(run.records["scheduled_s"].min())
    return machine_speed(run.steps.loc[run.steps["t_s"] >= start + warmup_s], step_cost)
