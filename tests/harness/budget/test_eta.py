"""The seconds left in a job, re-estimated from the runs that finished."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harness.budget import JobPlan, PlannedRun, plan_line, progress_note, seconds_left


def planned(system, seconds, repetition=1):
    return PlannedRun(system, "w", repetition, 100, seconds - 2.0, seconds)


# Two repetitions of continuous 10 s, static 20 s, naive 30 s; the report takes 5 s.
JOB = JobPlan(tuple(planned(system, seconds, rep) for rep in (1, 2)
                    for system, seconds in (("continuous", 10.0), ("static", 20.0), ("naive", 30.0))),
              before_s=90.0, after_s=5.0)


def test_before_any_run_the_estimates_stand():
    assert seconds_left(JOB, []) == pytest.approx(120.0 + 5.0)
    assert seconds_left(JOB, [], running_for_s=4.0) == pytest.approx(116.0 + 5.0)


def test_a_machine_slower_than_estimated_stretches_every_run_left():
    # Continuous took 12 s of its 10: every system without a finished run is scaled alike.
    assert seconds_left(JOB, [12.0]) == pytest.approx(1.2 * 110.0 + 5.0)


def test_each_system_is_scaled_by_its_own_finished_runs():
    # Continuous 1.5x its estimate, static as estimated; naive, not yet run, by all of them: 35 / 30.
    left = seconds_left(JOB, [15.0, 20.0])
    assert left == pytest.approx(30.0 * 35.0 / 30.0 + 10.0 * 1.5 + 20.0 * 1.0 + 30.0 * 35.0 / 30.0 + 5.0)


def test_the_run_under_way_counts_what_is_left_of_it():
    assert seconds_left(JOB, [10.0], running_for_s=15.0) == pytest.approx(5.0 + 90.0 + 5.0)
    # One that overran its estimate ends any moment.
    assert seconds_left(JOB, [10.0], running_for_s=60.0) == pytest.approx(90.0 + 5.0)


def test_after_the_last_run_only_the_report_is_left():
    assert seconds_left(JOB, [10.0, 20.0, 30.0, 10.0, 20.0, 30.0]) == pytest.approx(5.0)


def test_more_finished_runs_than_planned_is_an_error():
    with pytest.raises(ValueError, match="7 runs finished, but the job has 6"):
        seconds_left(JOB, [1.0] * 7)


NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def test_the_plan_says_its_runs_its_total_and_when_it_ends():
    assert plan_line(JOB, NOW) == "plan: 6 runs (3 cells x 2 repetitions), about 3.6 min in all, ending about 06:03"


def test_a_progress_note_counts_the_run_under_way_and_the_time_left():
    # Static under way for 5 s after continuous ran as estimated: 15 + 90 + 5 s left.
    assert progress_note(JOB, [10.0], 5.0, NOW) == "run 2 of 6, about 1.8 min left, ending about 06:01"
