"""Pure analysis: predictions and back-of-envelope physics, no I/O.

`simulate` predicts each batching system's schedule and throughput from a step-cost
model (`step_cost`), fitted on the engine's own steps by `step_fit` and applied per
server, each cell held out, by `step_predict`; `physics` derives a model's decode
numbers (weights, KV cache, compute/memory crossover) on a given GPU; `gpu_cost`,
`gpu_schedule`, `gpu_setups` and `gpu_predict` predict a GPU engine's throughput on paper
(step cost from the hardware card, a block-level vLLM schedule, sourced constants). `metrics` turns
one run's tables into its throughput and latency figures, `engine` does the same from
the engine's step log, `gap` lays runs side by side across spread levels; `rundir` is
the one I/O module, reading a finished run directory. The names below are the
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
from harness.analysis.gap import GapEntry, Prediction, check_acceptance, gap_table, predict_for_run, spread_level
from harness.analysis.gpu_cost import GpuStepCost, StepWork
from harness.analysis.gpu_predict import WorkloadPrediction, predict_workload, sensitivity
from harness.analysis.gpu_schedule import EngineLimits, EngineSchedule, simulate_engine
from harness.analysis.gpu_setups import GpuSetup, find_setup
from harness.analysis.health import Check, Health, cell_health, run_health
from harness.analysis.levels import Level, is_cap, level_name
from harness.analysis.metrics import Percentiles, RunMetrics, compute_run_metrics, metrics_for_run
from harness.analysis.physics import GpuSpec, ModelCard, ModelShape, model_card
from harness.analysis.rundir import RunData, load_run
from harness.analysis.simulate import ScheduleResult, SlotSpan, StepTimeModel, simulate, slot_diagram
from harness.analysis.stats import Estimate, median_ci, paired_ratio_ci, unpaired_ratio_ci
from harness.analysis.step_cost import LinearStepCost, StepCost
from harness.analysis.step_fit import StepFit, StepSample, fit_step_cost
from harness.analysis.step_predict import FittedPrediction, ServerStepModel, predict_held_out, server_models

__all__ = [
    "AssessedRun",
    "Cell",
    "Check",
    "EngineLimits",
    "EngineMetrics",
    "EngineSchedule",
    "Estimate",
    "FittedPrediction",
    "GapEntry",
    "GpuSetup",
    "GpuSpec",
    "GpuStepCost",
    "HeadlineRow",
    "Health",
    "Level",
    "LinearStepCost",
    "ModelCard",
    "ModelShape",
    "Percentiles",
    "Prediction",
    "RunData",
    "RunMetrics",
    "ScheduleResult",
    "ServerStepModel",
    "SlotSpan",
    "StepCost",
    "StepFit",
    "StepSample",
    "StepTimeModel",
    "StepWork",
    "WorkloadPrediction",
    "assess_run",
    "build_cells",
    "cell_health",
    "check_acceptance",
    "client_engine_disagreement",
    "compute_run_metrics",
    "engine_metrics",
    "find_setup",
    "fit_step_cost",
    "front_end_starved_share",
    "gap_table",
    "headline",
    "is_cap",
    "level_name",
    "load_run",
    "median_ci",
    "median_run",
    "metrics_for_run",
    "model_card",
    "occupancy_steps",
    "paired_ratio_ci",
    "predict_for_run",
    "predict_held_out",
    "predict_workload",
    "run_health",
    "sensitivity",
    "server_models",
    "simulate",
    "simulate_engine",
    "slot_diagram",
    "spread_level",
    "unpaired_ratio_ci",
]
