"""Run directories measured and judged the one way every consumer sees them.

The report (harness.report.assemble), the history and the gate (harness.history,
harness.gate) all read runs through `assess_run_dirs`, so a figure in the history is
the figure the report shows: each run's metrics, its held-out prediction from the
engine-fitted step cost, its figures at the sweep's one machine speed, and its health.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.cells import AssessedRun, assess_run
from harness.analysis.gap import GapEntry
from harness.analysis.metrics import metrics_for_run
from harness.analysis.speed import RunTiming, normalise
from harness.analysis.step_cost_fit import StepCostFit
from harness.analysis.step_predict import FittedPrediction, predict_held_out
from harness.rundir.reader import RunData, load_run


@dataclass(frozen=True)
class Assessment:
    """Runs loaded and assessed together (one sweep, one machine-speed fit)."""

    runs: tuple[RunData, ...]
    assessed: tuple[AssessedRun, ...]
    # Held-out predictions by run id (runs with engine steps only).
    predictions: dict[str, FittedPrediction]
    # The step cost common to every run with steps (harness.analysis.speed); None without.
    common_fit: StepCostFit | None


def assess_run_dirs(run_dirs: Sequence[Path], allow_partial: bool = False) -> Assessment:
    """Load every run directory (UsageError on a bad one) and assess each against the others."""
    runs = [load_run(directory, allow_partial) for directory in run_dirs]
    predictions = predict_held_out(runs)
    measured = {data.manifest.run_id: metrics_for_run(data) for data in runs}
    timings = {}
    for data in runs:
        metrics = measured[data.manifest.run_id]
        if data.steps is not None and metrics.makespan_s > 0:
            timings[data.manifest.run_id] = RunTiming(
                data.steps, metrics.makespan_s, metrics.prompt_tokens + metrics.useful_tokens
            )
    common_fit, at_one_speed = normalise(timings)
    assessed = []
    for data in runs:
        metrics = measured[data.manifest.run_id]
        fitted = predictions.get(data.manifest.run_id)
        entry = GapEntry.from_run(data, metrics, fitted.prediction if fitted else None)
        assessed.append(assess_run(data, metrics, entry, at_one_speed.get(data.manifest.run_id)))
    return Assessment(tuple(runs), tuple(assessed), predictions, common_fit)
