"""Medians, ratios and their intervals for repeated benchmark cells: each interval's stated coverage holds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.stats import (
    Estimate,
    coefficient_of_variation,
    median_ci,
    order_statistic_coverage,
    paired_ratio_ci,
    relative_spread,
    unpaired_ratio_ci,
)

# Any warning (scipy's, numpy's divide-by-zero) fails the test.
pytestmark = pytest.mark.filterwarnings("error")

CELL = [100.0, 101.0, 99.0, 100.0, 102.0]


def test_plain_floats_and_the_same_result_every_time():
    values = [980.0, 1012.0, 1003.0, 995.0, 1020.0, 990.0, 1001.0]
    assert median_ci(values) == median_ci(values)
    est = median_ci(values)
    assert all(type(x) is float for x in (est.point, est.low, est.high, est.coverage))
    assert type(est.n) is int


def test_a_few_runs_give_their_range_with_its_true_coverage():
    est = median_ci(CELL)
    assert (est.point, est.low, est.high, est.n) == (100.0, 99.0, 102.0, 5)
    assert est.coverage == pytest.approx(1 - 2 / 2**5)
    assert est.interval_label == "range (93.8%)"
    three = median_ci([100.0, 90.0, 110.0])
    assert (three.low, three.high, three.coverage, three.interval_label) == (90.0, 110.0, 0.75, "range (75%)")
    assert median_ci([110.0, 90.0]).interval_label == "range (50%)"


def test_many_runs_give_the_narrowest_order_statistics_that_reach_the_confidence():
    values = [float(v) for v in range(1, 16)]
    est = median_ci(values)
    # n = 15: [x_(4), x_(12)] holds the median with probability 96.5%; [x_(5), x_(11)] only 88.2%.
    assert (est.point, est.low, est.high) == (8.0, 4.0, 12.0)
    assert est.coverage == pytest.approx(order_statistic_coverage(15, 4)) and est.coverage >= 0.95
    assert order_statistic_coverage(15, 5) < 0.95
    assert est.interval_label == "96.5% interval"
    narrower = median_ci(values, confidence=0.5)
    assert narrower.high - narrower.low < est.high - est.low and narrower.coverage >= 0.5


def test_order_statistic_coverage_against_its_definition():
    assert order_statistic_coverage(3, 1) == 0.75
    assert order_statistic_coverage(9, 2) == pytest.approx(1 - 2 * (1 + 9) / 2**9)
    with pytest.raises(ValueError):
        order_statistic_coverage(3, 3)


def test_single_value_has_no_interval():
    est = median_ci([1234.5])
    assert (est.point, est.low, est.high, est.n) == (1234.5, 1234.5, 1234.5, 1)
    assert "single value" in est.method and math.isnan(est.coverage)
    assert est.interval_label == "no interval"
    assert est.half_width_rel == 0.0


def test_estimate_properties():
    est = Estimate(point=100.0, low=90.0, high=110.0, n=3, method="test", coverage=0.95)
    assert est.half_width_rel == pytest.approx(0.1)
    assert est.contains(90.0) and est.contains(110.0) and est.contains(100.0)
    assert not est.contains(89.999) and not est.contains(110.001)
    assert est.interval_label == "95% interval"
    assert math.isnan(Estimate(0.0, -1.0, 1.0, 3, "test").half_width_rel)
    assert math.isnan(Estimate(math.inf, 1.0, math.inf, 3, "test").half_width_rel)
    assert math.isnan(Estimate(math.nan, 1.0, 2.0, 3, "test").half_width_rel)


def test_paired_ratio_exact():
    est = paired_ratio_ci([200.0, 202.0, 198.0], [100.0, 101.0, 99.0])
    assert est.point == pytest.approx(2.0) and est.low == pytest.approx(2.0) and est.high == pytest.approx(2.0)
    assert est.n == 3 and est.coverage == 0.95
    assert est.method.startswith("paired ratios")


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval_on_the_logs():
    a, b = [300.0, 200.0, 330.0, 210.0, 240.0], [100.0, 100.0, 110.0, 100.0, 100.0]
    logs = np.log(np.array(a) / np.array(b))
    est = paired_ratio_ci(a, b)
    assert est.point == pytest.approx(math.exp(logs.mean()))
    half = 2.7764451051977987 * logs.std(ddof=1) / math.sqrt(5)  # t(4) at 97.5%
    assert (est.low, est.high) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))


def test_pairing_cancels_drift_that_widens_the_unpaired_interval():
    b = [100.0, 150.0, 200.0]
    a = [2 * x for x in b]
    paired = paired_ratio_ci(a, b)
    assert paired.point == pytest.approx(2.0) and paired.high - paired.low == pytest.approx(0.0, abs=1e-12)
    unpaired = unpaired_ratio_ci(a, b)
    assert unpaired.point == 2.0
    assert unpaired.low < 2.0 < unpaired.high
    assert unpaired.high - unpaired.low > 0.5
    assert unpaired.low >= 200.0 / 200.0 and unpaired.high <= 400.0 / 100.0


def test_unpaired_ratio_of_medians_with_different_lengths_claims_no_coverage():
    a, b = [200.0, 210.0, 190.0, 205.0], [100.0, 102.0, 98.0]
    est = unpaired_ratio_ci(a, b)
    assert est.point == pytest.approx(202.5 / 100.0)
    assert 190.0 / 102.0 <= est.low < est.point < est.high <= 210.0 / 98.0
    assert est.n == 3 and "bootstrap" in est.method
    assert math.isnan(est.coverage) and est.interval_label == "interval, coverage not known"
    assert unpaired_ratio_ci(a, b, seed=3) == unpaired_ratio_ci(a, b, seed=3)


@pytest.mark.parametrize(
    ("a", "b", "low", "high"),
    [
        ([200.0], [90.0, 100.0, 110.0], 200.0 / 110.0, 200.0 / 90.0),
        ([190.0, 200.0, 210.0], [100.0, 100.0, 100.0], 1.9, 2.1),
        ([190.0, 210.0], [95.0, 100.0, 105.0], 190.0 / 105.0, 210.0 / 95.0),
        ([200.0], [100.0], 2.0, 2.0),
    ],
)
def test_unpaired_ratio_falls_back_to_extreme_bounds(a, b, low, high):
    est = unpaired_ratio_ci(a, b)
    assert est.point == pytest.approx(float(np.median(a) / np.median(b)))
    assert est.low == pytest.approx(low) and est.high == pytest.approx(high)
    assert "extreme-value" in est.method and math.isnan(est.coverage)


@pytest.mark.parametrize(
    "call",
    [
        lambda: median_ci([]),
        lambda: median_ci([100.0, math.nan, 101.0]),
        lambda: median_ci([100.0, math.inf]),
        lambda: median_ci([[1.0, 2.0], [3.0, 4.0]]),
        lambda: median_ci(CELL, confidence=1.0),
        lambda: paired_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0]),
        lambda: paired_ratio_ci([], []),
        lambda: paired_ratio_ci([1.0, 0.0, 3.0], [1.0, 2.0, 3.0]),
        lambda: paired_ratio_ci([1.0, 2.0, 3.0], [1.0, -2.0, 3.0]),
        lambda: paired_ratio_ci([1.0, math.nan, 3.0], [1.0, 2.0, 3.0]),
        lambda: unpaired_ratio_ci([1.0, 2.0], []),
        lambda: unpaired_ratio_ci([1.0, 2.0, 3.0], [1.0, 0.0, 3.0]),
        lambda: unpaired_ratio_ci([1.0, math.inf, 3.0], [1.0, 2.0, 3.0]),
        lambda: unpaired_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], resamples=0),
        lambda: relative_spread([]),
        lambda: coefficient_of_variation([1.0, math.nan]),
    ],
)
def test_invalid_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_relative_spread():
    assert relative_spread(CELL) == pytest.approx(0.03)
    assert relative_spread([42.0]) == 0.0
    assert relative_spread([50.0, 50.0, 50.0]) == 0.0


def test_coefficient_of_variation():
    assert coefficient_of_variation([1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert coefficient_of_variation([42.0]) == 0.0
    assert coefficient_of_variation([7.0, 7.0, 7.0]) == 0.0


# Simulation: 4,000 draws per case give the coverage within +-0.7% (one standard error at 95%: 0.34%).
DRAWS = 4000


def _within(hits: int, coverage: float) -> bool:
    return abs(hits / DRAWS - coverage) < 3 * math.sqrt(coverage * (1 - coverage) / DRAWS)


@pytest.mark.parametrize("runs", [3, 5, 9])
def test_a_cells_interval_holds_the_true_median_as_often_as_its_label_says(runs):
    rng = np.random.default_rng(runs)
    # Skewed run-to-run noise: the order-statistic interval needs no symmetry.
    draws = 1000.0 * np.exp(rng.gamma(2.0, 0.02, size=(DRAWS, runs)))
    true_median = 1000.0 * math.exp(0.02 * float(np.median(rng.gamma(2.0, 1.0, size=2_000_000))))
    estimates = [median_ci(row) for row in draws]
    hits = sum(est.contains(true_median) for est in estimates)
    assert len({est.coverage for est in estimates}) == 1
    assert _within(hits, estimates[0].coverage), (hits / DRAWS, estimates[0].interval_label)


@pytest.mark.parametrize("repetitions", [3, 5])
def test_a_headline_ratios_interval_holds_the_true_ratio_95_percent_of_the_time(repetitions):
    rng = np.random.default_rng(100 + repetitions)
    true_ratio, hits = 1.7, 0
    for _ in range(DRAWS):
        # Each repetition: a machine speed both systems share (cancelled by pairing), and each run's own noise.
        speed = np.exp(rng.normal(0.0, 0.10, size=repetitions))
        static = 4000.0 * speed * np.exp(rng.normal(0.0, 0.03, size=repetitions))
        continuous = true_ratio * 4000.0 * speed * np.exp(rng.normal(0.0, 0.03, size=repetitions))
        hits += paired_ratio_ci(continuous, static).contains(true_ratio)
    assert _within(hits, 0.95), hits / DRAWS
