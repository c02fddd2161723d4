"""Runs grouped into cells and cells into the headline, from stand-in runs with known tok/s."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.analysis.cells import AssessedRun, build_cells, headline, median_run
from harness.analysis.gap import GapEntry
from harness.analysis.health import Check, Health
from harness.analysis.stats import paired_ratio_ci, unpaired_ratio_ci

STABLE = Health(())
# A run that lost tokens: its figure is not the server's, whatever its repetitions show.
UNSTABLE = Health((Check("token count", -10.0, 0.0, False, "unstable",
                         "client received 90 tokens, engine generated 100"),))
# A run that failed only a check of precision: a warning, judged by how the ratio repeats.
IMPRECISE = Health((Check("makespan", 5.0, 20.0, False, "unstable", "run lasted 5.0 s"),))


# Runs start in the order they are made unless told otherwise: one system's repetitions
# all before the next system's, i.e. not interleaved.
CLOCK = itertools.count()


def run(system, level, tok_s, health=STABLE, name=None, started_at=None, engine=None):
    entry = GapEntry(workload=f"w{level}", level=level, system=system,
                     metrics=SimpleNamespace(total_tok_s=tok_s))
    started = float(next(CLOCK)) if started_at is None else started_at
    data = SimpleNamespace(path=Path(name or f"{system}-{level}-{tok_s}"), manifest=SimpleNamespace(started_at=started))
    return AssessedRun(entry=entry, data=data, engine=engine, health=health)


def cells_of(runs):
    return {(cell.system, cell.level): cell for cell in build_cells(runs)}


def test_cells_group_by_system_and_level():
    runs = [
        run("continuous", 32, 300.0), run("static", 32, 100.0), run("continuous", 32, 310.0),
        run("continuous", 128, 500.0), run("continuous", 32, 305.0), run("static", 128, 200.0),
    ]
    cells = cells_of(runs)
    assert set(cells) == {("continuous", 32), ("static", 32), ("continuous", 128), ("static", 128)}
    assert [r.entry.metrics.total_tok_s for r in cells["continuous", 32].runs] == [300.0, 310.0, 305.0]
    assert cells["continuous", 32].total_tok_s.point == 305.0
    assert cells["continuous", 32].total_tok_s.n == 3
    assert cells["continuous", 128].runs == (runs[3],)


def test_a_named_level_and_an_int_level_are_different_cells():
    cells = cells_of([run("continuous", 32, 1.0), run("continuous", "32", 2.0)])
    assert set(cells) == {("continuous", 32), ("continuous", "32")}


def test_cell_health_comes_from_its_runs():
    cells = cells_of([
        *(run("continuous", 32, x) for x in (300.0, 301.0, 302.0)),
        *(run("static", 32, x) for x in (100.0, 101.0)),
        run("naive", 32, 50.0), run("naive", 32, 50.5, UNSTABLE), run("naive", 32, 51.0),
    ])
    assert cells["continuous", 32].health.stable
    assert not cells["static", 32].health.stable  # two repetitions
    naive = cells["naive", 32].health
    assert not naive.stable
    assert naive.reasons == ["1 of 3 runs unstable (client received 90 tokens, engine generated 100)"]


def test_a_run_that_failed_only_on_precision_leaves_its_cell_a_warning():
    cells = cells_of([run("naive", 32, 50.0), run("naive", 32, 50.5, IMPRECISE), run("naive", 32, 51.0)])
    naive = cells["naive", 32].health
    assert naive.stable and naive.verdict == "stable"
    assert naive.notes == ["1 of 3 runs with a warning (run lasted 5.0 s): the ratio's repetitions show whether it"
                           " moved the figure"]


@pytest.mark.parametrize(
    ("rates", "expected"),
    [([3.0, 1.0, 2.0], 2.0), ([300.0, 100.0, 200.0, 400.0], 200.0), ([7.0], 7.0), ([9.0, 4.0], 4.0)],
)
def test_median_run_is_the_lower_median(rates, expected):
    runs = [run("continuous", 32, x, name=f"r{i}") for i, x in enumerate(rates)]
    (cell,) = build_cells(runs)
    chosen = median_run(cell)
    assert chosen is runs[rates.index(expected)]


# Repetitions within ±2%: every ratio's interval is inside the headline's ±5%.
CONT = (300.0, 303.0, 306.0)
STAT = (100.0, 101.0, 102.0)
NAIVE = (50.0, 50.5, 51.0)


def level_runs(level, systems=("continuous", "static", "naive"), health=None):
    rates = {"continuous": CONT, "static": STAT, "naive": NAIVE}
    return [run(s, level, x, (health or {}).get(s, STABLE)) for s in systems for x in rates[s]]


def test_headline_ratios_per_level():
    (row,) = headline(build_cells(level_runs(512)))
    assert row.level == 512
    assert set(row.ratios) == {"continuous/static", "continuous/naive"}
    assert row.ratios["continuous/static"].point == pytest.approx(303.0 / 101.0)
    assert row.ratios["continuous/naive"].point == pytest.approx(303.0 / 50.5)
    assert row.ratios["continuous/static"] == unpaired_ratio_ci(CONT, STAT)
    assert row.ratios["continuous/static"].low <= 303.0 / 101.0 <= row.ratios["continuous/static"].high
    assert row.stable and row.reasons == ()


def test_headline_uses_only_the_denominators_present():
    (row,) = headline(build_cells(level_runs(32, ("continuous", "naive"))))
    assert set(row.ratios) == {"continuous/naive"}


def test_headline_skips_levels_without_continuous_or_a_denominator():
    cells = build_cells([*level_runs(32, ("static", "naive")), *level_runs(128, ("continuous",))])
    assert headline(cells) == []


def test_headline_is_unstable_when_a_run_of_its_systems_is():
    runs = level_runs(32, health={"static": UNSTABLE})
    (row,) = headline(build_cells(runs))
    assert not row.stable
    assert row.verdict == "unstable" and not row.usable
    assert row.reasons == ("static: 3 of 3 runs unstable (client received 90 tokens, engine generated 100)",)


def test_a_run_short_of_precision_is_a_warning_in_the_headline_not_its_verdict():
    runs = [*level_runs(32, ("continuous", "naive")), *level_runs(32, ("static",), health={"static": IMPRECISE})]
    (row,) = headline(build_cells(runs))
    assert row.stable and row.reasons == ()
    assert row.run_warnings == ("static: 3 of 3 runs with a warning (run lasted 5.0 s): the ratio's repetitions"
                                " show whether it moved the figure",)


def test_headline_names_each_failed_ratio_then_each_failed_system():
    runs = [*level_runs(32, ("continuous", "static")), run("continuous", 32, 303.5, UNSTABLE)]
    runs += [run("naive", 32, 50.0)]  # one repetition only
    (row,) = headline(build_cells(runs))
    assert not row.stable
    assert row.reasons == ("continuous/naive: 1 repetition(s), fewer than 3: no interval",
                           "continuous: 1 of 4 runs unstable (client received 90 tokens, engine generated 100)")


def test_headline_ignores_systems_outside_its_ratios():
    runs = [*level_runs(32), run("other", 32, 1.0)]  # a lone run would be an unstable cell
    (row,) = headline(build_cells(runs))
    assert row.stable


def test_headline_orders_int_caps_ascending_before_named_levels():
    runs = [*level_runs("mixed"), *level_runs(1536), *level_runs(32), *level_runs(512), *level_runs(128)]
    assert [row.level for row in headline(build_cells(runs))] == [32, 128, 512, 1536, "mixed"]


def interleaved_runs(level, order=("continuous", "static")):
    """Repetition r of each system back to back, as a sweep runs them."""
    rates = {"continuous": (300.0, 330.0, 270.0), "static": (100.0, 110.0, 90.0)}
    return [run(system, level, rates[system][rep], started_at=10.0 * rep + i)
            for rep in range(3) for i, system in enumerate(order)]


def test_interleaved_repetitions_give_a_paired_ratio():
    # The machine ran 10% fast in repetition 2 and 10% slow in 3: every pair still says 3.0.
    (row,) = headline(build_cells(interleaved_runs(32)))
    ratio = row.ratios["continuous/static"]
    assert ratio == paired_ratio_ci([300.0, 330.0, 270.0], [100.0, 110.0, 90.0])
    assert ratio.point == pytest.approx(3.0) and ratio.low == pytest.approx(3.0) and ratio.high == pytest.approx(3.0)
    assert "paired" in ratio.method


def test_runs_that_did_not_alternate_get_the_unpaired_ratio():
    runs = [run("continuous", 32, x, started_at=t) for x, t in zip((300.0, 330.0, 270.0), (0.0, 1.0, 2.0), strict=True)]
    runs += [run("static", 32, x, started_at=t) for x, t in zip((100.0, 110.0, 90.0), (3.0, 4.0, 5.0), strict=True)]
    (row,) = headline(build_cells(runs))
    assert row.ratios["continuous/static"] == unpaired_ratio_ci([300.0, 330.0, 270.0], [100.0, 110.0, 90.0])


def test_unequal_repetitions_are_not_paired():
    runs = [*interleaved_runs(32), run("static", 32, 95.0, started_at=99.0)]
    (row,) = headline(build_cells(runs))
    assert "paired" not in row.ratios["continuous/static"].method


def test_a_machine_that_moves_the_cells_but_not_the_paired_ratio_leaves_the_headline_stable():
    from harness.analysis.engine import EngineMetrics

    # Continuous at cap 128: the same 1,365 steps each time at median step times 9.3-11.9 ms.
    continuous = (6706.0, 8615.0, 8218.0)
    static = [rate / ratio for rate, ratio in zip(continuous, (1.24, 1.25, 1.23), strict=True)]
    step_ms = (11.88, 9.34, 9.97)
    runs = []
    for rep in range(3):
        runs.append(run("continuous", 128, continuous[rep], started_at=10.0 * rep,
                        engine=EngineMetrics(1365, 30.0, 1, 1.0, 0.9, step_ms[rep] / 1000)))
        runs.append(run("static", 128, static[rep], started_at=10.0 * rep + 1))
    cells = build_cells(runs)
    (row,) = headline(cells)
    speed = ("same schedule (1365-1365 engine steps) at median step times of 9.3-11.9 ms (±13%): the machine's"
             " speed varied, not the scheduler")
    assert row.stable and row.reasons == ()
    # The geometric mean of the pairs' ratios, with its t interval on their logs.
    assert row.ratios["continuous/static"].point == pytest.approx((1.24 * 1.25 * 1.23) ** (1 / 3))
    assert row.ratios["continuous/static"].coverage == 0.95
    assert row.notes == (f"continuous: {speed}",)
    (cell,) = [c for c in cells if c.system == "continuous"]
    assert cell.health.stable
    assert cell.health.notes == [f"repetitions spread ±11.6% around the median ({speed})"]


def test_ratios_at_one_speed_come_beside_the_measured_ones_when_every_run_has_them():
    from harness.analysis.speed import SpeedNormalised

    runs = interleaved_runs(32)
    at_one_speed = {"continuous": 300.0, "static": 100.0}
    with_speed = [AssessedRun(r.entry, r.data, None, r.health, SpeedNormalised(1.0, at_one_speed[r.entry.system]))
                  for r in runs]
    (row,) = headline(build_cells(with_speed))
    assert row.normalised_ratios["continuous/static"].point == pytest.approx(3.0)
    (cell,) = [c for c in build_cells(with_speed) if c.system == "static"]
    assert cell.normalised_tok_s is not None and cell.normalised_tok_s.point == 100.0
    # One run without: no figure at one speed for the cell or the ratio.
    partial = [*with_speed[:-1], runs[-1]]
    (row,) = headline(build_cells(partial))
    assert row.normalised_ratios == {}
