"""Medians, bootstrap intervals and ratios for repeated benchmark cells."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.stats import (
    Estimate,
    coefficient_of_variation,
    median_ci,
    paired_ratio_ci,
    relative_spread,
    unpaired_ratio_ci,
)

# Any warning (scipy's DegenerateDataWarning, numpy's divide-by-zero) fails the test.
pytestmark = pytest.mark.filterwarnings("error")

CELL = [100.0, 101.0, 99.0, 100.0, 102.0]


def test_same_seed_same_result_and_plain_floats():
    values = [980.0, 1012.0, 1003.0, 995.0, 1020.0, 990.0, 1001.0]
    assert median_ci(values, seed=7) == median_ci(values, seed=7)
    a, b = [200.0, 230.0, 190.0, 210.0], [100.0, 90.0, 105.0, 98.0]
    assert paired_ratio_ci(a, b, seed=3) == paired_ratio_ci(a, b, seed=3)
    assert unpaired_ratio_ci(a, b, seed=3) == unpaired_ratio_ci(a, b, seed=3)
    est = median_ci(values)
    assert all(type(x) is float for x in (est.point, est.low, est.high))
    assert type(est.n) is int


def test_known_cell():
    est = median_ci(CELL)
    assert est.point == 100.0
    assert est.contains(100.0)
    assert 99.0 <= est.low <= est.point <= est.high <= 102.0
    assert est.n == 5
    assert est.method == "bootstrap percentile, 9999 resamples"


def test_bootstrap_is_narrower_than_the_range_for_many_values():
    values = [float(v) for v in range(1, 16)]
    est = median_ci(values)
    assert est.point == 8.0
    assert 1.0 < est.low < 8.0 < est.high < 15.0
    assert median_ci(values, confidence=0.5).high - median_ci(values, confidence=0.5).low < est.high - est.low


def test_interval_narrows_as_spread_shrinks():
    offsets = np.array([-3.0, 1.0, 0.0, 2.0, -1.0, 4.0, -2.0])
    widths = [median_ci(1000.0 + scale * offsets).half_width_rel for scale in (10.0, 3.0, 1.0, 0.1)]
    assert widths == sorted(widths, reverse=True)
    assert len(set(widths)) == len(widths)
    assert widths[-1] < 0.001 < widths[0]


def test_single_value():
    est = median_ci([1234.5])
    assert (est.point, est.low, est.high, est.n) == (1234.5, 1234.5, 1234.5, 1)
    assert "single value" in est.method
    assert est.half_width_rel == 0.0


def test_two_values_give_their_range():
    est = median_ci([110.0, 90.0])
    assert (est.point, est.low, est.high, est.n) == (100.0, 90.0, 110.0, 2)
    assert est.half_width_rel == pytest.approx(0.1)


def test_all_equal_values():
    est = median_ci([500.0] * 6)
    assert (est.point, est.low, est.high, est.n) == (500.0, 500.0, 500.0, 6)
    assert "equal" in est.method


def test_bounds_never_leave_the_observed_values():
    rng = np.random.default_rng(1)
    for seed in range(200):
        values = 1000.0 * np.exp(rng.normal(0.0, 0.03, size=3))
        est = median_ci(values, resamples=999, seed=seed)
        assert values.min() <= est.low <= est.high <= values.max()


def test_estimate_properties():
    est = Estimate(point=100.0, low=90.0, high=110.0, n=3, method="test")
    assert est.half_width_rel == pytest.approx(0.1)
    assert est.contains(90.0) and est.contains(110.0) and est.contains(100.0)
    assert not est.contains(89.999) and not est.contains(110.001)
    assert math.isnan(Estimate(0.0, -1.0, 1.0, 3, "test").half_width_rel)
    assert math.isnan(Estimate(math.inf, 1.0, math.inf, 3, "test").half_width_rel)
    assert math.isnan(Estimate(math.nan, 1.0, 2.0, 3, "test").half_width_rel)


def test_paired_ratio_exact():
    est = paired_ratio_ci([200.0, 202.0, 198.0], [100.0, 101.0, 99.0])
    assert (est.point, est.low, est.high, est.n) == (2.0, 2.0, 2.0, 3)
    assert est.method.startswith("paired ratios")


def test_pairing_cancels_drift_that_widens_the_unpaired_interval():
    b = [100.0, 150.0, 200.0]
    a = [2 * x for x in b]
    paired = paired_ratio_ci(a, b)
    assert (paired.point, paired.low, paired.high) == (2.0, 2.0, 2.0)
    unpaired = unpaired_ratio_ci(a, b)
    assert unpaired.point == 2.0
    assert unpaired.low < 2.0 < unpaired.high
    assert unpaired.high - unpaired.low > 0.5
    assert unpaired.low >= 200.0 / 200.0 and unpaired.high <= 400.0 / 100.0


def test_paired_ratio_uses_the_median_of_pair_ratios():
    est = paired_ratio_ci([300.0, 200.0, 330.0, 210.0, 240.0], [100.0, 100.0, 110.0, 100.0, 100.0])
    assert est.point == 2.4  # ratios 3.0, 2.0, 3.0, 2.1, 2.4
    assert 2.0 <= est.low <= est.point <= est.high <= 3.0


def test_unpaired_ratio_of_medians_with_different_lengths():
    a, b = [200.0, 210.0, 190.0, 205.0], [100.0, 102.0, 98.0]
    est = unpaired_ratio_ci(a, b)
    assert est.point == pytest.approx(202.5 / 100.0)
    assert 190.0 / 102.0 <= est.low < est.point < est.high <= 210.0 / 98.0
    assert est.n == 3
    assert "bootstrap" in est.method


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
    assert "extreme-value" in est.method


@pytest.mark.parametrize(
    "call",
    [
        lambda: median_ci([]),
        lambda: median_ci([100.0, math.nan, 101.0]),
        lambda: median_ci([100.0, math.inf]),
        lambda: median_ci([[1.0, 2.0], [3.0, 4.0]]),
        lambda: median_ci(CELL, confidence=1.0),
        lambda: median_ci(CELL, resamples=0),
        lambda: paired_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0]),
        lambda: paired_ratio_ci([], []),
        lambda: paired_ratio_ci([1.0, 0.0, 3.0], [1.0, 2.0, 3.0]),
        lambda: paired_ratio_ci([1.0, 2.0, 3.0], [1.0, -2.0, 3.0]),
        lambda: paired_ratio_ci([1.0, math.nan, 3.0], [1.0, 2.0, 3.0]),
        lambda: unpaired_ratio_ci([1.0, 2.0], []),
        lambda: unpaired_ratio_ci([1.0, 2.0, 3.0], [1.0, 0.0, 3.0]),
        lambda: unpaired_ratio_ci([1.0, math.inf, 3.0], [1.0, 2.0, 3.0]),
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


def test_coverage_of_the_true_median():
    rng = np.random.default_rng(2024)
    hits = 0
    for seed in range(200):
        values = 1000.0 * np.exp(rng.normal(0.0, 0.03, size=5))
        est = median_ci(values, resamples=999, seed=seed)
        assert values.min() <= est.low <= est.point <= est.high <= values.max()
        hits += est.contains(1000.0)
    assert hits >= 160  # expected about 94% at n = 5 (1 - 2 / 2**5)
