"""Predict each run from a step model fitted on engine steps of the same server.

One model per server (one set of constants for every workload it served), fitted
on the steps.parquet of its runs (harness.analysis.step_fit). A run's prediction
comes from the model fitted on the server's *other* cells (leave one cell out: a
cell is one system at one spread level, all its repetitions): fitting on the runs
being predicted would let the model learn their own quirks, so agreement would
prove less. A server that served only one cell has nothing to hold out; its runs
are predicted in sample, and the prediction says so (`held_out` False).

Naive runs also need the client's turnaround between waves, the engine's mean idle
gap in the (held-out) naive runs of the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.gap import Prediction, predict_for_run, spread_level
from harness.analysis.levels import Level
from harness.analysis.step_fit import StepFit, StepFitError, StepSample, busy_steps, fit_step_cost, mean_idle_gap
from harness.rundir.reader import RunData


@dataclass(frozen=True)
class ServerStepModel:
    """A step model of one server, and the runs it was fitted on."""

    server: str
    fit: StepFit
    wave_gap_s: float
    fitted_on: tuple[str, ...]


@dataclass(frozen=True)
class FittedPrediction:
    """One run's prediction and the model it came from."""

    prediction: Prediction
    model: ServerStepModel
    held_out: bool


def server_key(run: RunData) -> str:
    """Which server a run measured: mode, pid and start time of the launched server."""
    server = run.manifest.server or {}
    return f"{server.get('mode', '?')} server pid {server.get('pid', '?')} started {server.get('started_at', '?')}"


def fit_server_model(runs: Sequence[RunData]) -> ServerStepModel:
    """Fit one model on every run given (all from one server, all with steps)."""
    fit = fit_step_cost(StepSample.concat([busy_steps(_steps(run)) for run in runs]))
    naive = [_steps(run) for run in runs if run.manifest.system == "naive"]
    return ServerStepModel(
        server=server_key(runs[0]),
        fit=fit,
        wave_gap_s=mean_idle_gap(naive),
        fitted_on=tuple(run.manifest.run_id for run in runs),
    )


def server_models(runs: Sequence[RunData]) -> list[ServerStepModel]:
    """One model per server, fitted on all of its runs that have engine steps: the report's constants.

    A server whose steps cannot fit a model (step_fit.StepFitError) has none.
    """
    models = []
    for members in _by_server(runs).values():
        with contextlib.suppress(StepFitError):
            models.append(fit_server_model(members))
    return models


def predict_held_out(runs: Sequence[RunData]) -> dict[str, FittedPrediction]:
    """Predictions by run_id for every run with engine steps and a replayable plan."""
    predictions: dict[str, FittedPrediction] = {}
    for members in _by_server(runs).values():
        cells: dict[tuple[str, Level], list[RunData]] = {}
        for run in members:
            cells.setdefault(_cell(run), []).append(run)
        for cell, cell_runs in cells.items():
            others = [run for run in members if _cell(run) != cell]
            try:
                model = fit_server_model(others or cell_runs)
            except StepFitError:
                continue  # too few or too odd steps for a model: these runs get no prediction
            held_out = bool(others)
            if cell[0] == "naive" and not any(run.manifest.system == "naive" for run in others):
                # No other naive cell to learn the client's turnaround from: this cell's own, in sample.
                gap = mean_idle_gap([_steps(run) for run in cell_runs])
                model, held_out = ServerStepModel(model.server, model.fit, gap, model.fitted_on), False
            for run in cell_runs:
                prediction = predict_for_run(
                    _requests(run), run.manifest.batch_size, run.manifest.system, model.fit.cost,
                    wave_gap_s=model.wave_gap_s,
                )
                if prediction is not None:
                    predictions[run.manifest.run_id] = FittedPrediction(prediction, model, held_out)
    return predictions


def _by_server(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
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
