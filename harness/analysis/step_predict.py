"""Predict each run from a step cost fitted on engine steps of the same server.

One step cost per server (one set of constants for every workload it served), fitted
on the steps.parquet of its runs (harness.analysis.step_cost_fit). A run's prediction
comes from the step cost fitted on the server's *other* cells (leave one cell out: a
cell is one system at one spread level, all its repetitions): fitting on the runs
being predicted would let the fit learn their own quirks, so agreement would
prove less. A server that served only one cell has nothing to hold out; its runs
are predicted in sample, and the prediction says so (`held_out` False).

Runs in waves (naive, client-static) also need the client's turnaround between waves, the engine's mean idle
gap in the (held-out) wave runs of the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.gap import RunPrediction, predict_for_run, spread_level
from harness.analysis.levels import Level
from harness.analysis.step_cost_fit import (
    StepCostFit,
    StepCostFitError,
    StepSample,
    busy_steps,
    fit_step_cost,
    mean_idle_gap,
)
from harness.rundir.reader import RunData
from harness.systems import WAVE_SYSTEMS


@dataclass(frozen=True)
class ServerStepCost:
    """The step cost fitted on one server's runs, and which runs they were."""

    server: str
    fit: StepCostFit
    wave_gap_s: float
    fitted_on: tuple[str, ...]


@dataclass(frozen=True)
class FittedPrediction:
    """One run's prediction and the fitted step cost it came from."""

    prediction: RunPrediction
    step_cost: ServerStepCost
    held_out: bool


def server_key(run: RunData) -> str:
    """Which server a run measured: mode, pid and start time of the launched server."""
    server = run.manifest.server
    if server is None:
        return "? server pid ? started ?"
    return f"{server.mode or '?'} server pid {server.pid or '?'} started {server.started_at or '?'}"


def fit_server_step_cost(runs: Sequence[RunData]) -> ServerStepCost:
    """Fit one step cost on every run given (all from one server, all with steps)."""
    fit = fit_step_cost(StepSample.concat([busy_steps(_steps(run)) for run in runs]))
    waves = [_steps(run) for run in runs if run.manifest.system in WAVE_SYSTEMS]
    return ServerStepCost(
        server=server_key(runs[0]),
        fit=fit,
        wave_gap_s=mean_idle_gap(waves),
        fitted_on=tuple(run.manifest.run_id for run in runs),
    )


def server_step_costs(runs: Sequence[RunData]) -> list[ServerStepCost]:
    """One step cost per server, fitted on all of its runs that have engine steps: the report's constants.

    A server whose steps cannot be fitted (step_cost_fit.StepCostFitError) has none.
    """
    costs = []
    for members in runs_by_server(runs).values():
        with contextlib.suppress(StepCostFitError):
            costs.append(fit_server_step_cost(members))
    return costs


def predict_held_out(runs: Sequence[RunData]) -> dict[str, FittedPrediction]:
    """Predictions by run_id for every run with engine steps and a replayable plan."""
    predictions: dict[str, FittedPrediction] = {}
    for members in runs_by_server(runs).values():
        cells: dict[tuple[str, Level], list[RunData]] = {}
        for run in members:
            cells.setdefault(_cell(run), []).append(run)
        for cell, cell_runs in cells.items():
            others = [run for run in members if _cell(run) != cell]
            try:
                step_cost = fit_server_step_cost(others or cell_runs)
            except StepCostFitError:
                continue  # too few or too odd steps to fit: these runs get no prediction
            held_out = bool(others)
            if cell[0] in WAVE_SYSTEMS and not any(run.manifest.system in WAVE_SYSTEMS for run in others):
                # No other cell of waves to learn the client's turnaround from: this cell's own, in sample.
                gap = mean_idle_gap([_steps(run) for run in cell_runs])
                step_cost, held_out = ServerStepCost(step_cost.server, step_cost.fit, gap, step_cost.fitted_on), False
            for run in cell_runs:
                prediction = predict_for_run(
                    _requests(run), run.manifest.batch_size, run.manifest.system, step_cost.fit.cost,
                    wave_gap_s=step_cost.wave_gap_s,
                )
                if prediction is not None:
                    predictions[run.manifest.run_id] = FittedPrediction(prediction, step_cost, held_out)
    return predictions


def runs_by_server(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    """The runs with engine steps and a plan (the ones a step cost can be fitted on and replayed), by server."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        if run.steps is not None and not run.steps.empty and run.plan is not None:
            groups.setdefault(server_key(run), []).append(run)
    return groups


def _steps(run: RunData) -> pd.DataFrame:
    """The step log of a run that `_by_server` kept (it keeps only runs that have one)."""
    if run.steps is None:
        raise ValueError(f"run {run.manifest.run_id} has no engine step log")
    return run.steps


def _requests(run: RunData) -> list[dict[str, Any]]:
    """The planned requests of a run that `_by_server` kept (it keeps only runs with a plan)."""
    if run.plan is None:
        raise ValueError(f"run {run.manifest.run_id} has no plan")
    requests: list[dict[str, Any]] = run.plan["requests"]
    return requests


def _cell(run: RunData) -> tuple[str, Level]:
    return run.manifest.system, spread_level(run.manifest.workload)
