"""Each Poisson run's latency predicted from the engine steps of the same server's other runs.

The step cost is fitted as the throughput predictions fit it (harness.analysis.step_predict):
on the server's runs other than the one predicted (its burst and its other rates), so a
rate is predicted without its own run. The schedule simulator (harness.paper.simulate)
replays the run's plan, its arrival times included, under that step cost and, for static,
the server's max batch delay. A request's predicted E2E is its simulated finish minus its
arrival; the client's own overhead (HTTP, tokenising, streaming) is not in it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.gap import simulate_plan
from harness.analysis.step_cost_fit import StepCostFitError
from harness.analysis.step_predict import fit_server_step_cost, runs_by_server
from harness.paper.step_cost import StepCost
from harness.rundir.reader import RunData


@dataclass(frozen=True)
class PredictedPoint:
    """A run's predicted median latencies, seconds (requests arriving after the warm-up)."""

    e2e_p50_s: float
    ttft_p50_s: float
    fitted_on: tuple[str, ...]  # the runs whose steps the step cost was fitted on


def predict_points(runs: Sequence[RunData], warmup_s: float,
                   static_batch_wait_s: float | None) -> dict[str, PredictedPoint]:
    """Predictions by run_id for every Poisson run with engine steps and a plan.

    A server with a single run has nothing to hold out and gets no prediction.
    """
    predicted: dict[str, PredictedPoint] = {}
    for members in runs_by_server(runs).values():
        for run in members:
            if run.manifest.workload["arrival"]["kind"] != "poisson":
                continue
            others = [other for other in members if other is not run]
            with contextlib.suppress(StepCostFitError, ValueError):
                cost = fit_server_step_cost(others)
                predicted[run.manifest.run_id] = _predict(run, cost.fit.cost, warmup_s, static_batch_wait_s or 0.0,
                                                          cost.fitted_on)
    return predicted


def _predict(run: RunData, step_cost: StepCost, warmup_s: float, batch_wait_s: float,
             fitted_on: tuple[str, ...]) -> PredictedPoint:
    assert run.plan is not None, "predict_points keeps only runs with a plan"
    schedule = simulate_plan(run.plan["requests"], run.manifest.batch_size, run.manifest.system, step_cost,
                             static_batch_wait_s=batch_wait_s)
    if schedule is None:
        return PredictedPoint(math.nan, math.nan, fitted_on)
    arrivals = np.array([request["arrival_s"] for request in run.plan["requests"]], dtype=float)
    measured = arrivals >= warmup_s
    if not measured.any():
        return PredictedPoint(math.nan, math.nan, fitted_on)
    return PredictedPoint(
        e2e_p50_s=float(np.median(schedule.finish_s[measured] - arrivals[measured])),
        ttft_p50_s=float(np.median(schedule.first_token_s[measured] - arrivals[measured])),
        fitted_on=fitted_on,
    )
