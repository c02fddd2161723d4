"""What changed between two builds, read from synthetic step logs whose every figure is set by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.compare.explain import CHANGE, explain
from harness.rundir.records import STEP_FIELDS


def run(steps=100, step_s=0.05, running=16, idle_s=0.0, prefill=512, admit_every=10, admitted=4):
    """A steps table: `steps` back-to-back steps of `step_s` (plus `idle_s` between), every
    `admit_every`-th admitting `admitted` requests and computing `prefill` prompt tokens."""
    rows = []
    for i in range(steps):
        t = i * (step_s + idle_s)
        admits = i % admit_every == 0
        rows.append({
            "t_s": t, "end_s": t + step_s, "running": running, "waiting": 0,
            "prefill_tokens": prefill if admits else 0, "decode_tokens": running, "context_tokens": 0,
            "generated_tokens": running, "admitted": list(range(i, i + admitted)) if admits else [],
            "finished": [],
        })
    return pd.DataFrame(rows, columns=list(STEP_FIELDS))


def test_each_sides_figures_are_the_medians_across_repetitions():
    # A disturbed middle repetition: the medians are those of the two alike.
    runs = [run(), run(step_s=0.075, idle_s=0.01, running=20, admitted=8), run()]
    change = explain(runs, runs[::-1])
    a = change.a
    assert a.steps == 100
    assert a.step_seconds == pytest.approx(0.05)
    assert a.admitted_per_step == 4
    assert a.prefill_per_step == 512
    assert a.running == 16
    assert a.makespan_seconds == pytest.approx(5.0)
    assert change.ratio.makespan_seconds == pytest.approx(1.0)


def test_slower_steps_are_the_step_time_cause():
    change = explain([run()] * 3, [run(step_s=0.055)] * 3)
    assert change.ratio.step_seconds == pytest.approx(1.1)
    assert change.split.step_time == pytest.approx(math.log(1.1))
    assert change.split.steps == 0
    assert change.split.idle == pytest.approx(0, abs=1e-12)
    assert change.split.total == pytest.approx(math.log(1.1))
    assert change.summary == (
        "B's engine steps take 10.0% longer with the same number of steps: B's server is slower per step (its build, or"
        " the machine during its runs)"
    )


def test_more_steps_of_narrower_batches_are_the_steps_cause():
    change = explain([run(running=16)] * 2, [run(steps=112, running=14)] * 2)
    assert change.ratio.steps == pytest.approx(1.12)
    assert change.split.steps == pytest.approx(math.log(1.12))
    assert change.split.step_time == pytest.approx(0)
    assert change.summary == (
        "B makes 12.0% more steps of narrower batches (14.0 against 16.0 requests a step): it admits differently"
    )


def test_more_steps_with_smaller_prefills_name_the_prompt_split():
    change = explain([run()], [run(steps=120, prefill=256, admit_every=12)])
    assert change.ratio.prefill_per_step == pytest.approx(0.5)
    assert change.summary == (
        "B makes 20.0% more steps, computing 256 prompt tokens per prefill step against 512: "
        "it splits prompts differently"
    )


def test_gaps_between_steps_are_the_idle_cause():
    change = explain([run()], [run(idle_s=0.005)])
    assert change.split.steps == 0
    assert change.split.step_time == pytest.approx(0)
    assert change.split.idle == pytest.approx(change.split.total)
    assert change.split.total == pytest.approx(math.log((99 * 0.055 + 0.05) / 5.0))
    assert change.summary.startswith("B's engine sits longer idle between steps")


def test_identical_logs_show_no_change():
    change = explain([run()] * 2, [run()] * 2)
    assert change.split.total == 0
    assert change.summary == (
        f"no change beyond {CHANGE:.0%} in steps, step time, idle time, batch width, admissions or prefill"
    )


def test_admissions_that_move_without_the_makespan_are_named():
    change = explain([run()], [run(admitted=6)])
    assert change.split.total == 0
    assert change.summary == (
        "B's steps, step time and idle time match A's within 1%, though it admits 6.0 requests per admitting "
        "step against 4.0"
    )


def test_a_change_within_the_threshold_is_no_change():
    assert explain([run()], [run(step_s=0.05 * (1 + CHANGE / 2))]).summary.startswith("no change beyond")


def test_an_empty_side_or_run_is_refused():
    with pytest.raises(ValueError, match="side B has no repetitions"):
        explain([run()], [])
    with pytest.raises(ValueError, match="no engine steps"):
        explain([run().iloc[:0]], [run()])
