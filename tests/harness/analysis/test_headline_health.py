"""The headline's verdict on its own paired ratios, from repetitions shaped like measured sweeps."""

from __future__ import annotations

import pytest

from harness.analysis.engine import EngineMetrics
from harness.analysis.health import Check, HeadlineMember, Health, headline_health
from harness.analysis.stats import paired_ratio_ci, unpaired_ratio_ci

STABLE_RUNS = (Health(()),) * 3
# Continuous at cap 1536 in a sweep on a drifting machine: the cell spread ±11%.
CONTINUOUS = (4701.0, 3988.0, 5007.0)


def engine(steps, median_step_ms):
    return EngineMetrics(steps, 60.0, 12_000, 200.0, 0.9, median_step_ms / 1000)


def paired(ratios, numerators=CONTINUOUS):
    """The paired ratio of repetitions whose per-repetition ratios are `ratios`."""
    return paired_ratio_ci(numerators, [n / r for n, r in zip(numerators, ratios, strict=True)])


def member(system, runs=STABLE_RUNS, engines=()):
    return HeadlineMember(system, tuple(runs), tuple(engines))


# The same schedule each time at step times 10.6-14.6 ms: the machine's speed moved the cell.
DRIFTING = (engine(1851, 10.6), engine(1857, 14.6), engine(1854, 12.5))


def test_paired_ratios_hold_while_the_machine_speed_moves_the_cells():
    ratios = {"continuous/static": paired([1.41, 1.44, 1.38]), "continuous/naive": paired([2.53, 2.48, 2.58])}
    health = headline_health(ratios, [member("continuous", engines=DRIFTING), member("static"), member("naive")])
    # The pairs' ratios lie within ±2.1% of the ratio: it repeats. Its t interval at 3 pairs is wider (±5.3%).
    assert ratios["continuous/static"].spread == pytest.approx(0.03 / ratios["continuous/static"].point)
    assert ratios["continuous/static"].half_width_rel == pytest.approx(0.0529, abs=1e-3)
    assert health.stable and health.reasons == []
    assert health.notes == ["continuous: same schedule (1851-1857 engine steps) at median step times of 10.6-14.6 ms"
                            " (±16%): the machine's speed varied, not the scheduler"]


def test_a_wide_paired_interval_without_one_speed_is_unstable_and_says_by_how_much():
    # Cap 32 in the reference report: continuous's step time moved ±26% between a pair's runs.
    ratios = {"continuous/static": paired([1.263, 1.204, 0.834])}
    health = headline_health(ratios, [member("continuous", engines=DRIFTING), member("static")])
    assert health.verdict == "unstable"
    assert health.reasons == ["continuous/static: repetitions spread ±19.8% around the ratio (limit ±5%); no engine"
                              " log tells the machine's speed from the schedule"]
    assert health.briefs == ["continuous/static ±19.8%"]


@pytest.mark.parametrize(("half", "stable"), [(0.049, True), (0.051, False)])
def test_the_limit_is_five_percent_of_the_ratio(half, stable):
    health = headline_health({"continuous/static": paired([1.0 - half, 1.0, 1.0 + half])}, [member("continuous")])
    assert health.stable is stable


def test_an_unpaired_ratio_is_judged_on_its_own_interval():
    ratio = unpaired_ratio_ci([300.0, 330.0, 270.0], [100.0, 110.0, 90.0])
    health = headline_health({"continuous/static": ratio}, [member("continuous"), member("static")])
    assert not health.stable and "(unpaired)" in health.reasons[0]


def test_fewer_than_three_repetitions_give_no_verdict():
    health = headline_health({"continuous/static": paired([1.41, 1.42], CONTINUOUS[:2])}, [member("continuous")])
    assert not health.stable
    assert health.reasons[0] == "continuous/static: 2 repetition(s), fewer than 3: no interval"


def test_an_unstable_run_of_a_member_makes_the_row_unstable():
    starved = Health((Check("front-end starvation", 0.12, 0.05, False, "unstable", "the front end set the pace"),))
    health = headline_health({"continuous/static": paired([1.41, 1.42, 1.40])},
                             [member("continuous"), member("static", (Health(()), starved, Health(())))])
    assert health.reasons == ["static: 1 of 3 runs unstable (the front end set the pace)"]
    assert health.briefs == ["static 1 of 3 runs unstable"]


@pytest.mark.parametrize(("check", "verdict"), [
    (Check("makespan", 19.7, 20.0, False, "unstable", "run lasted 19.7 s"), "stable"),
    (Check("client vs engine", 0.021, 0.02, False, "unstable", "differ by -2.1%"), "stable"),
    (Check("client vs engine", 0.06, 0.02, False, "unstable", "differ by -6.0%"), "unstable"),
])
def test_a_run_short_only_of_precision_is_a_warning_on_that_run(check, verdict):
    # The fresh-clone reproduction of 2026-12-07 ended exit 3 on a 19.7 s run and on one at -2.0%: neither moved
    # its ratio beyond ±5%, which the ratio's repetitions show. Past the headline's ±5% a disagreement could.
    health = headline_health({"continuous/static": paired([1.41, 1.42, 1.40])},
                             [member("continuous"), member("static", (Health(()), Health((check,)), Health(())))])
    assert health.verdict == verdict
    if verdict == "stable":
        assert health.run_warnings == [f"static: 1 of 3 runs with a warning ({check.text}): the ratio's repetitions"
                                       " show whether it moved the figure"]


def test_static_batches_that_vary_with_arrival_order_are_a_note():
    # Static at cap 1536 in the reference report: 5,887-6,293 steps (±3.4%).
    engines = (engine(5887, 4.7), engine(6293, 5.5), engine(6100, 5.1))
    health = headline_health({"continuous/static": paired([1.41, 1.42, 1.40])},
                             [member("continuous"), member("static", engines=engines)])
    assert health.stable
    # One rule for "the schedule differed" (±5%, as the headline's): within it, the machine's speed moved the cell.
    assert health.notes == ["static: same schedule (5887-6293 engine steps) at median step times of"
                            " 4.7-5.5 ms (±8%): the machine's speed varied, not the scheduler"]


def test_a_schedule_that_moved_is_a_note_while_the_ratio_repeats():
    # An open-loop trace's continuous steps vary by nature; what the headline claims is the ratio.
    engines = (engine(5000, 5.0), engine(5600, 5.0), engine(5300, 5.0))
    health = headline_health({"continuous/static": paired([1.41, 1.42, 1.40])},
                             [member("continuous"), member("static", engines=engines)])
    assert health.verdict == "stable"
    assert health.notes == ["static: the schedule differed between repetitions: 5000-5600 engine steps"
                            " (±5.7%, limit ±5%)"]


def test_a_ratio_moved_by_the_machine_alone_is_noisy_and_says_so():
    # Shaped like cap 128 continuous/naive in a default reproduction (2026-12-02): measured 1.78 (1.74-1.92),
    # at one speed 1.676 (1.671-1.686); here measured a little wider.
    ratios = {"continuous/naive": paired([1.72, 1.78, 1.94])}
    at_one_speed = {"continuous/naive": paired([1.671, 1.676, 1.686])}
    health = headline_health(ratios, [member("continuous", engines=DRIFTING), member("naive")], at_one_speed)
    assert health.verdict == "noisy" and health.stable and health.reasons == []
    assert health.noisy == ["continuous/naive: repetitions spread ±6.1% around the ratio (limit ±5%); at one machine"
                            " speed 1.68× within ±0.4%: the schedules repeated and the machine's speed moved"]
    assert health.briefs == ["continuous/naive ±6.1%, at one speed ±0.4%: machine speed"]


def test_a_ratio_that_moves_at_one_speed_too_is_unstable():
    ratios = {"continuous/static": paired([1.30, 1.42, 1.48])}
    at_one_speed = {"continuous/static": paired([1.30, 1.42, 1.45])}
    health = headline_health(ratios, [member("continuous"), member("static")], at_one_speed)
    assert health.verdict == "unstable"
    assert health.briefs == ["continuous/static ±6.4%, at one speed ±5.4%"]
    assert health.reasons[0].endswith("at one machine speed too (±5.4%): the schedules differed")


def test_a_ratio_that_repeats_is_stable_whatever_its_value_at_one_speed():
    # STABLE is about the ratio shown; at one speed only explains a ratio that did not repeat.
    ratios = {"continuous/static": paired([1.41, 1.42, 1.40])}
    at_one_speed = {"continuous/static": paired([1.30, 1.42, 1.45])}
    health = headline_health(ratios, [member("continuous"), member("static")], at_one_speed)
    assert health.verdict == "stable"
