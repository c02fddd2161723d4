"""The gap table, its acceptance findings, and predictions replaying a run's plan."""

from __future__ import annotations

import dataclasses
import math

import pytest

from harness.analysis.gap import GapEntry, RunPrediction, check_acceptance, gap_table, predict_for_run, spread_level
from harness.analysis.metrics import Percentiles, RunMetrics
from harness.paper.simulate import InterpolatedStepCost
from harness.workload import load_spec
from harness.workload.plan import PlannedRequest

NAN_DIST = Percentiles.of([])
BASE = RunMetrics(
    requests=1, ok=1, failed=0, length_mismatches=0, errors={}, makespan_s=1.0, prompt_tokens=0,
    useful_tokens=0, generated_tokens=0, output_tok_s=0.0, generated_tok_s=0.0, total_tok_s=0.0, req_s=1.0,
    ttft_s=NAN_DIST, e2e_s=NAN_DIST, useful_e2e_s=NAN_DIST, tpot_s=NAN_DIST, itl_s=NAN_DIST, slo_met=1,
    slo_met_fraction=1.0, goodput_req_s=1.0, mean_occupancy=math.nan, useful_slot_time_fraction=math.nan,
    lateness_s=NAN_DIST,
)


def entry(level, system, total, output=None, predicted=None, workload=None):
    metrics = dataclasses.replace(BASE, total_tok_s=total, output_tok_s=output if output is not None else total / 2)
    prediction = RunPrediction(predicted, predicted / 2, 1.0, 0.5) if predicted else None
    return GapEntry(workload or f"cap{level}", level, system, metrics, prediction)


# Given out of order: the table must sort caps numerically and put labels last.
ENTRIES = [
    entry("seed", "continuous", 400.0, workload="seed"),
    entry("seed", "naive", 50.0, workload="seed"),
    entry(128, "naive", 100.0, predicted=110.0),
    entry(32, "static", 200.0, predicted=190.0),
    entry(128, "continuous", 600.0, predicted=500.0),
    entry(32, "continuous", 300.0),
    entry(32, "naive", 100.0),
    entry(128, "static", 300.0),
]


def test_gap_table_layout_and_ratios():
    table = gap_table(ENTRIES)
    assert table["level"].tolist() == [32, 128, "seed"]
    assert table["workload"].tolist() == ["cap32", "cap128", "seed"]
    assert table["continuous_total_tok_s"].tolist() == [300.0, 600.0, 400.0]
    assert table["continuous_output_tok_s"].tolist() == [150.0, 300.0, 200.0]
    assert table["continuous/static"].iloc[:2].tolist() == [1.5, 2.0]
    assert table["continuous/naive"].tolist() == [3.0, 6.0, 8.0]
    assert table["static/naive"].iloc[:2].tolist() == [2.0, 3.0]
    # No static run for the seed: its ratios are NaN, not an error.
    assert math.isnan(table.loc[2, "static_total_tok_s"]) and math.isnan(table.loc[2, "continuous/static"])


def test_gap_table_relative_difference_to_prediction():
    table = gap_table(ENTRIES)
    assert table.loc[1, "continuous_predicted_total_tok_s"] == 500.0
    assert table.loc[1, "continuous_vs_predicted"] == pytest.approx(0.2)
    assert table.loc[0, "static_vs_predicted"] == pytest.approx(200 / 190 - 1)
    assert math.isnan(table.loc[0, "continuous_vs_predicted"])


def test_gap_table_refuses_two_runs_of_a_system_at_a_level():
    with pytest.raises(ValueError, match="two static runs at spread level 32"):
        gap_table([entry(32, "static", 1.0), entry(32, "static", 2.0, workload="other")])


def test_acceptance_findings_pass_and_fail():
    findings = check_acceptance(gap_table(ENTRIES))
    assert findings[0] == "PASS: static/naive grows with spread: 2.00 -> 3.00 (caps 32, 128)"
    assert findings[1] == "PASS: continuous/static grows with spread: 1.50 -> 2.00 (caps 32, 128)"
    assert findings[2] == "PASS: continuous/naive grows with spread: 3.00 -> 6.00 (caps 32, 128)"
    assert findings[3] == "PASS: continuous beats static at every cap above 32 (lowest continuous/static 2.00)"
    # continuous at 128 is 20% over its prediction; naive (-9.1%) and static (+5.3%) are inside.
    assert findings[4:] == [
        "FAIL: each system within 10% of its prediction: continuous at cap 128 measured +20.0% from predicted"
    ]


def test_acceptance_reports_a_shrinking_gap_and_a_losing_continuous():
    entries = [
        entry(32, "static", 100.0), entry(32, "naive", 50.0), entry(32, "continuous", 90.0),
        entry(512, "static", 100.0), entry(512, "naive", 100.0), entry(512, "continuous", 95.0),
    ]
    findings = check_acceptance(gap_table(entries))
    assert findings[0] == "FAIL: static/naive grows with spread: 2.00 -> 1.00 (caps 32, 512)"
    assert findings[3] == "FAIL: continuous beats static at every cap above 32: continuous/static 0.95 at cap 512"
    assert findings[4] == "SKIP: each system within 10% of its prediction: no predictions"


def test_acceptance_passing_predictions_names_the_worst():
    entries = [entry(32, "static", 100.0, predicted=110.0), entry(32, "continuous", 200.0, predicted=190.0)]
    findings = check_acceptance(gap_table(entries))
    assert findings[0].startswith("SKIP: static/naive grows with spread")
    assert findings[-1] == "PASS: each system within 10% of its prediction (2 runs; worst static at cap 32, -9.1%)"


def test_spread_level_is_the_cap_or_the_name():
    assert spread_level(load_spec("anyscale-cap512")) == 512
    assert spread_level(load_spec("seed-100-200-300-1000")) == "seed-100-200-300-1000"


# Seed example cycled twice, B = 4, 1 ms per step whatever the batch, 10-token prompts.
SEED_PLAN = [
    {"index": i, "prompt_tokens": 10, "output_tokens": n, "arrival_s": 0.0}
    for i, n in enumerate([100, 200, 300, 1000] * 2)
]
ONE_MS = InterpolatedStepCost.from_points({1: 0.001})


def test_predict_static_and_naive_wait_for_the_longest():
    # Two batches of 1000 steps: 2.0 s for 3200 useful tokens and 80 prompt tokens.
    for system in ("static", "naive"):
        predicted = predict_for_run(SEED_PLAN, 4, system, ONE_MS)
        assert predicted.makespan_s == pytest.approx(2.0)
        assert predicted.output_tok_s == pytest.approx(1600.0)
        assert predicted.total_tok_s == pytest.approx(1640.0)
        assert predicted.useful_fraction == pytest.approx(0.4)


def test_predict_continuous_refills_rows():
    # Rows: r0 (0-100) then r4 (100-200) then r5 (200-400); r1 (0-200) then r6 (200-500);
    # r2 (0-300) then r7 (300-1300); r3 (0-1000). Makespan 1300 steps.
    predicted = predict_for_run([PlannedRequest(**r) for r in SEED_PLAN], 4, "continuous", ONE_MS)
    assert predicted.makespan_s == pytest.approx(1.3)
    assert predicted.total_tok_s == pytest.approx(3280 / 1.3)


def test_predict_closed_loop_has_nothing_to_replay():
    closed = [{**r, "arrival_s": None} for r in SEED_PLAN]
    assert predict_for_run(closed, 4, "continuous", ONE_MS) is None


def test_transformers_systems_get_their_columns_and_ratios_only_where_measured():
    table = gap_table([*ENTRIES, entry(32, "hf-continuous", 150.0), entry(32, "hf-sequential", 50.0)])
    assert table["hf-continuous/hf-sequential"].iloc[0] == 3.0
    assert table["continuous/hf-continuous"].iloc[0] == 2.0
    assert math.isnan(table["hf-continuous_total_tok_s"].iloc[1])
    columns = list(table.columns)
    assert columns.index("naive_vs_predicted") < columns.index("hf-continuous_total_tok_s")
    assert "hf-continuous_total_tok_s" not in gap_table(ENTRIES)
    alone = gap_table([entry(32, "hf-continuous", 150.0)])
    assert "hf-continuous/hf-sequential" not in alone and math.isnan(alone["continuous/hf-continuous"].iloc[0])
