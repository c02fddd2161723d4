"""Analysis of measured runs: pure functions over a run's loaded tables.

`metrics` turns one run's tables into its throughput and latency figures, `engine` does
the same from the engine's step log, `gap` lays runs side by side across spread levels,
each beside its prediction (harness.paper.simulate); `step_cost_fit` fits the step cost
(harness.paper.step_cost) on the engine's own steps and `step_predict` applies it per
server, each cell held out. `assess` is the one module that reads: it loads run
directories through harness.rundir and assesses them together. The names below are the
package's public surface; the modules' other names (thresholds, helpers) stay theirs.
"""

from harness.analysis.cells import AssessedRun, Cell, HeadlineRow, assess_run, build_cells, headline, median_run
from harness.analysis.engine import (
    EngineMetrics,
    client_engine_disagreement,
    engine_metrics,
    front_end_starved_share,
    occupancy_steps,
)
from harness.analysis.gap import GapEntry, RunPrediction, check_acceptance, gap_table, predict_for_run, spread_level
from harness.analysis.health import Check, Health, cell_health, run_health
from harness.analysis.levels import Level, is_cap, level_name
from harness.analysis.metrics import Percentiles, RunMetrics, compute_run_metrics, metrics_for_run
from harness.analysis.stats import Estimate, median_ci, paired_ratio_ci, unpaired_ratio_ci
from harness.analysis.step_cost_fit import StepCostFit, StepSample, fit_step_cost
from harness.analysis.step_predict import FittedPrediction, ServerStepCost, predict_held_out, server_step_costs

__all__ = [
    "AssessedRun",
    "Cell",
    "Check",
    "EngineMetrics",
    "Estimate",
    "FittedPrediction",
    "GapEntry",
    "HeadlineRow",
    "Health",
    "Level",
    "Percentiles",
    "RunMetrics",
    "RunPrediction",
    "ServerStepCost",
    "StepCostFit",
    "StepSample",
    "assess_run",
    "build_cells",
    "cell_health",
    "check_acceptance",
    "client_engine_disagreement",
    "compute_run_metrics",
    "engine_metrics",
    "fit_step_cost",
    "front_end_starved_share",
    "gap_table",
    "headline",
    "is_cap",
    "level_name",
    "median_ci",
    "median_run",
    "metrics_for_run",
    "occupancy_steps",
    "paired_ratio_ci",
    "predict_for_run",
    "predict_held_out",
    "run_health",
    "server_step_costs",
    "spread_level",
    "unpaired_ratio_ci",
]
