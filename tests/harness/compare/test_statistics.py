"""The paired judgement: outcomes on clear cases, its interval's coverage and its rates on simulated pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.compare import DEFAULT_PAIR_NOISE, DEFAULT_POWER, DEFAULT_THRESHOLD
from harness.compare.statistics import detectable_drop, judge_pairs, pairs_needed

A = [1000.0, 1020.0, 980.0, 1010.0, 990.0]
# Per-pair noise in B/A: +-1%, mean zero in the log.
WOBBLE = [1.01, 0.99, 1.0, 1.01, 0.99]


def b_side(ratio, wobble=WOBBLE):
    return [a * ratio * w for a, w in zip(A, wobble, strict=True)]


def simulate(pairs, drop, draws, seed, noise=DEFAULT_PAIR_NOISE):
    """judge_pairs on `draws` sets of pairs whose log ratios are N(log(1 - drop), noise^2)."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(900.0, 1100.0, size=(draws, pairs))
    b = a * np.exp(rng.normal(math.log1p(-drop), noise, size=(draws, pairs)))
    return [judge_pairs(a_row, b_row) for a_row, b_row in zip(a, b, strict=True)]


def test_a_clear_drop_is_a_regression_with_its_figures():
    verdict = judge_pairs(A, b_side(0.9))
    assert verdict.outcome == "regression"
    assert verdict.pairs == 5
    # The wobble's logs nearly cancel: the geometric mean of the ratios is 0.9 to 4 digits.
    assert verdict.ratio == pytest.approx(0.9, abs=1e-4)
    assert verdict.low < verdict.ratio < verdict.high < 1
    assert verdict.noise == pytest.approx(np.std(np.log(WOBBLE), ddof=1))
    assert verdict.line == pytest.approx(1 - DEFAULT_THRESHOLD)
    assert verdict.reasons[0].startswith("B is 10.0% slower than A")
    assert "5 pairs" in verdict.reasons[1]


def test_the_interval_is_the_t_interval_on_the_log_ratios():
    verdict = judge_pairs(A, b_side(0.98), confidence=0.9)
    d = np.log(np.asarray(b_side(0.98)) / np.asarray(A))
    half = 2.1318467863266504 * d.std(ddof=1) / math.sqrt(5)  # t_{4, 0.95}
    assert verdict.low == pytest.approx(math.exp(d.mean() - half))
    assert verdict.high == pytest.approx(math.exp(d.mean() + half))
    assert verdict.confidence == 0.9


def test_no_change_and_a_gain_pass():
    same = judge_pairs(A, b_side(1.0))
    assert same.outcome == "pass"
    assert "at or above the line" in same.reasons[0]
    gain = judge_pairs(A, b_side(1.1))
    assert gain.outcome == "pass"
    assert gain.reasons[0].startswith("B is 10.0% faster than A")


def test_identical_pairs_make_a_point_interval():
    flat = judge_pairs(A, [a * 0.95 for a in A])
    assert flat.noise == 0
    assert flat.low == flat.ratio == flat.high == pytest.approx(0.95)
    assert flat.outcome == "regression"
    assert flat.detectable_drop == DEFAULT_THRESHOLD
    assert judge_pairs(A, [a * 0.98 for a in A]).outcome == "pass"


def test_a_drop_beyond_the_line_with_a_wide_interval_is_inconclusive_and_says_how_many_pairs_settle_it():
    verdict = judge_pairs(A, b_side(0.95, [1.06, 0.94, 1.0, 1.05, 0.95]))
    assert verdict.outcome == "inconclusive"
    assert verdict.ratio < verdict.line and verdict.high >= 1
    needed = pairs_needed(verdict.noise, 1 - verdict.ratio)
    assert needed is not None and needed > 5
    assert f"with {needed} pairs" in verdict.reasons[0]


def test_a_small_drop_whose_interval_crosses_the_line_is_inconclusive():
    verdict = judge_pairs(A, b_side(0.99, [1.04, 0.96, 1.0, 1.03, 0.97]))
    assert verdict.outcome == "inconclusive"
    assert verdict.line <= verdict.ratio and verdict.low < verdict.line
    assert "shows as a pass" in verdict.reasons[0]


def test_a_ratio_on_the_line_never_settles():
    # Log ratios centred on log(0.97): neither outcome's rate rises past one half.
    line = 1 - DEFAULT_THRESHOLD
    verdict = judge_pairs(A, b_side(line, [1.04, 0.96, 1 / (1.04 * 0.96), 1.0, 1.0]))
    assert verdict.outcome == "inconclusive"
    assert verdict.ratio == pytest.approx(line)
    assert "no number of pairs up to 10,000 settles it" in verdict.reasons[0]


@pytest.mark.parametrize(
    ("a", "b"),
    [([1.0], [1.0]), ([1.0, 2.0], [1.0]), ([1.0, 0.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, math.nan]),
     ([1.0, 2.0], [-1.0, 1.0])],
)
def test_too_few_unpaired_or_bad_values_are_refused(a, b):
    with pytest.raises(ValueError):
        judge_pairs(a, b)


@pytest.mark.parametrize("pairs", [3, 5])
def test_the_interval_covers_the_true_ratio_at_its_confidence(pairs):
    true = 0.96
    verdicts = simulate(pairs, 1 - true, draws=2000, seed=pairs)
    coverage = np.mean([v.low <= true <= v.high for v in verdicts])
    # 3 standard errors of a 95% rate over 2000 draws.
    assert abs(coverage - 0.95) < 3 * math.sqrt(0.95 * 0.05 / 2000)


def test_no_change_is_rarely_called_a_regression():
    verdicts = simulate(5, 0.0, draws=2000, seed=11)
    assert np.mean([v.outcome == "regression" for v in verdicts]) < 0.025


@pytest.mark.parametrize("pairs", [3, 5])
def test_the_detectable_drop_is_called_a_regression_at_the_stated_power(pairs):
    drop = detectable_drop(pairs, DEFAULT_PAIR_NOISE)
    rate = np.mean([v.outcome == "regression" for v in simulate(pairs, drop, draws=2000, seed=20 + pairs)])
    assert abs(rate - DEFAULT_POWER) < 3 * math.sqrt(DEFAULT_POWER * (1 - DEFAULT_POWER) / 2000)


def test_the_detectable_drop_shrinks_with_pairs_and_grows_with_noise():
    by_pairs = [detectable_drop(n, DEFAULT_PAIR_NOISE) for n in (2, 3, 5, 10, 40)]
    assert by_pairs == sorted(by_pairs, reverse=True)
    assert all(drop > DEFAULT_THRESHOLD for drop in by_pairs)
    by_noise = [detectable_drop(5, noise) for noise in (0.0, 0.005, 0.02, 0.05)]
    assert by_noise == sorted(by_noise)
    assert by_noise[0] == DEFAULT_THRESHOLD


def test_a_drop_no_pairs_can_show_short_of_everything_is_infinite():
    assert detectable_drop(2, 20.0) == math.inf
    assert detectable_drop(2, 1.0) < 1


@pytest.mark.parametrize(("noise", "drop"), [(0.02, 0.05), (0.02, 0.1), (0.05, 0.08), (0.01, 0.035)])
def test_pairs_needed_is_the_fewest_pairs_whose_detectable_drop_reaches_the_drop(noise, drop):
    needed = pairs_needed(noise, drop)
    assert needed is not None
    assert detectable_drop(needed, noise) <= drop + 1e-9
    if needed > 2:
        assert detectable_drop(needed - 1, noise) > drop


def test_pairs_needed_has_no_answer_within_the_threshold():
    assert pairs_needed(0.02, DEFAULT_THRESHOLD) is None
    assert pairs_needed(0.02, 0.01) is None
    assert pairs_needed(0.0, 0.04) == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"pairs": 1, "noise": 0.02}, {"pairs": 5, "noise": -0.1}, {"pairs": 5, "noise": math.inf},
     {"pairs": 5, "noise": 0.02, "power": 0.5}, {"pairs": 5, "noise": 0.02, "threshold": 0.0},
     {"pairs": 5, "noise": 0.02, "confidence": 1.0}],
)
def test_bad_plans_are_refused(kwargs):
    with pytest.raises(ValueError):
        detectable_drop(**kwargs)


@pytest.mark.parametrize("kwargs", [{"drop": 0.0}, {"drop": 1.0}, {"drop": 0.1, "noise": -0.1},
                                    {"drop": 0.1, "power": 1.0}])
def test_bad_drops_are_refused(kwargs):
    with pytest.raises(ValueError):
        pairs_needed(**{"noise": 0.02, **kwargs})
