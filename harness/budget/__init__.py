"""The main job on the user's clock: each run's duration before it runs, a running ETA, and
plans sized to a budget of minutes.

`estimate`, `eta` and `sizing` are pure but for JobClock, which reads the monotonic clock: a
step cost fitted on this machine's engine steps and a fixed overhead per run come in; they
start no server and read no run directory. Those costs come from `probe`, imported on its
own (not from this package): a short burst on each server before the job's first run, fitted
as the report fits its runs, or the packaged reference's costs (harness.reference)
at this machine's speed.
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
