"""Seconds left in a job, re-estimated each time a run finishes.

Before the first run the estimates are the step model's; each finished run says how far
this machine, now, is from them. A system's remaining runs are scaled by its finished
runs' measured over estimated seconds (a ratio of sums, so long runs weigh more than short
ones): per system, because the step model can misprice one system's steps (naive's padded
waves, static's draining batches) more than another's. A system with no finished run yet
takes the scale of every finished run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from harness.budget.estimate import JobPlan, PlannedRun


def seconds_left(job: JobPlan, finished_s: Sequence[float], running_for_s: float = 0.0) -> float:
    """Estimated seconds from now until `job` ends, its report included.

    `finished_s`: the measured seconds of the job's first runs, in order; the run after
    them has been running for `running_for_s`. The time before the first run
    (`job.before_s`) is over once runs are counted here.
    """
    done = len(finished_s)
    if done > len(job.runs):
        raise ValueError(f"finished_s: {done} runs finished, but the job has {len(job.runs)}")
    if running_for_s < 0 or any(seconds < 0 for seconds in finished_s):
        raise ValueError("finished_s, running_for_s: durations must be zero or positive")
    scales = _scales(job.runs[:done], finished_s)
    overall = _scale(job.runs[:done], finished_s)
    left = job.after_s
    for index, run in enumerate(job.runs[done:]):
        estimate = run.seconds * scales.get(run.system, overall)
        # The run under way has part of its estimate behind it; one that overran ends any moment.
        left += max(estimate - running_for_s, 0.0) if index == 0 else estimate
    return left


def plan_line(job: JobPlan, now: datetime) -> str:
    """The plan in one line, before the first run: runs, estimated total, and when it should end."""
    cells = len({(run.workload, run.system) for run in job.runs})
    repetitions = len({run.repetition for run in job.runs})
    return (f"plan: {len(job.runs)} runs ({cells} cells x {repetitions} repetitions), about"
            f" {job.total_s / 60:.1f} min in all, ending about {_clock(now, job.total_s)}")


def progress_note(job: JobPlan, finished_s: Sequence[float], running_for_s: float, now: datetime) -> str:
    """Where a progress line stands in the job: the run under way, of how many, and the ETA."""
    left = seconds_left(job, finished_s, running_for_s)
    run = min(len(finished_s) + 1, len(job.runs))
    return f"run {run} of {len(job.runs)}, about {left / 60:.1f} min left, ending about {_clock(now, left)}"


def _clock(now: datetime, seconds: float) -> str:
    return f"{now + timedelta(seconds=seconds):%H:%M}"


def _scales(runs: Sequence[PlannedRun], measured_s: Sequence[float]) -> dict[str, float]:
    """Each system's measured over estimated seconds, over its finished runs."""
    systems = dict.fromkeys(run.system for run in runs)
    return {system: _scale([run for run in runs if run.system == system],
                           [seconds for run, seconds in zip(runs, measured_s, strict=True) if run.system == system])
            for system in systems}


def _scale(runs: Sequence[PlannedRun], measured_s: Sequence[float]) -> float:
    estimated = sum(run.seconds for run in runs)
    return sum(measured_s) / estimated if estimated > 0 else 1.0


class JobClock:
    """Where a job stands for its progress lines: run k of N, and the ETA from the runs so far.

    `job` None: no estimate (yet): the note says only run k of `total_runs`. `replan` gives
    the clock a job later; its runs include those already made, in order.
    """

    def __init__(self, job: JobPlan | None, total_runs: int) -> None:
        self.job, self.total_runs = job, total_runs
        self.finished_s: list[float] = []
        self.since = time.monotonic()

    def replan(self, job: JobPlan) -> None:
        """Estimate the rest from `job`, whose first runs are those finished so far."""
        self.job, self.total_runs = job, len(job.runs)

    def run_done(self) -> None:
        """A run ended: its seconds count from the end of the previous one (a report written between them included)."""
        now = time.monotonic()
        self.finished_s.append(now - self.since)
        self.since = now

    def note(self) -> str:
        """The progress note: run k of N, and with a job the minutes left and when it should end."""
        run = min(len(self.finished_s) + 1, self.total_runs)
        if self.job is None:
            return f"run {run} of {self.total_runs}"
        return progress_note(self.job, self.finished_s, time.monotonic() - self.since, datetime.now())
