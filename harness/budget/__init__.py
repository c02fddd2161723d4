"""The main job on the user's clock: each run's duration before it runs, a running ETA, and
plans sized to a budget of minutes.

Pure but for JobClock, which reads the monotonic clock: a step cost fitted on this machine's
engine steps and a fixed overhead per run come in; nothing here starts a server or reads a
run directory.
"""

from harness.budget.estimate import JobPlan, MachineCost, PlannedRun, plan_job, simulate_run
from harness.budget.eta import JobClock, plan_line, progress_note, seconds_left
from harness.budget.sizing import MAX_RATIO_SHIFT, Sizing, size_for_budget

__all__ = [
    "MAX_RATIO_SHIFT",
    "JobClock",
    "JobPlan",
    "MachineCost",
    "PlannedRun",
    "Sizing",
    "plan_job",
    "plan_line",
    "progress_note",
    "seconds_left",
    "simulate_run",
    "size_for_budget",
]
