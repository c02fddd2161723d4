"""Rows against the plan: every owed request exactly once, nothing else."""

from __future__ import annotations

from harness.rundir.accounting import owed_ids, row_problems


def test_rows_that_match_the_plan_have_no_problem():
    assert row_problems([2, 0, 1], planned=3, not_due=0) == []


def test_a_closed_loops_unreached_tail_is_not_owed():
    assert list(owed_ids(10, 4)) == [0, 1, 2, 3, 4, 5]
    assert row_problems(range(6), planned=10, not_due=4) == []


def test_missing_repeated_and_unplanned_rows_are_each_named():
    problems = row_problems([0, 0, 2, 7], planned=4, not_due=0)
    assert problems == [
        "2 planned requests have no row (ids 1, 3)",
        "1 requests have more than one row (ids 0)",
        "1 rows are not in the plan's owed requests (ids 7)",
    ]


def test_long_id_lists_stay_on_one_line():
    (problem,) = row_problems([], planned=100, not_due=0)
    assert problem == "100 planned requests have no row (ids 0, 1, 2, 3, 4, ...)"
