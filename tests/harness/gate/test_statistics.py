"""The gate's decision: outcomes on clear cases, every inconclusive rule, and its rates on simulated repetitions."""

from __future__ import annotations

import math

import pytest

from harness.gate.power import simulate_outcomes
from harness.gate.rule import GateRule
from harness.gate.statistics import between_night_noise, decide, repetitions_needed, smallest_p_value

BASE = [1000.0, 1010.0, 990.0, 1005.0, 995.0]


def scaled(values, factor):
    return [v * factor for v in values]


def test_a_clear_drop_is_a_regression_with_its_figures():
    verdict = decide(BASE, scaled(BASE, 0.85))
    assert verdict.outcome == "regression"
    assert verdict.ratio.point == pytest.approx(0.85)
    assert verdict.ratio.low <= 0.85 <= verdict.ratio.high
    # No candidate repetition above any baseline repetition: the smallest p 5 against 5 allows.
    assert verdict.p_value == pytest.approx(1 / 252)
    assert (verdict.n_baseline, verdict.n_candidate) == (5, 5)
    assert verdict.baseline_cv == pytest.approx(verdict.candidate_cv)
    assert verdict.line == pytest.approx(0.95)
    assert "15.0% slower" in verdict.reasons[0]


def test_no_change_and_a_gain_pass():
    assert decide(BASE, scaled(BASE, 1.0)).outcome == "pass"
    gain = decide(BASE, scaled(BASE, 1.2))
    assert gain.outcome == "pass"
    assert gain.p_value > 0.9


def test_identical_samples_pass():
    verdict = decide([1000.0] * 5, [1000.0] * 5)
    assert verdict.outcome == "pass"
    assert verdict.ratio.point == 1.0
    assert verdict.p_value == 1.0
    assert verdict.baseline_cv == verdict.candidate_cv == 0.0


def test_a_significant_drop_within_the_threshold_passes():
    verdict = decide(BASE, scaled(BASE, 0.98))
    assert verdict.p_value <= verdict.alpha
    assert verdict.outcome == "pass"
    assert "within the 5.0% threshold" in verdict.reasons[0]


def test_between_night_noise_widens_the_line():
    candidate = scaled(BASE, 0.92)
    assert decide(BASE, candidate).outcome == "regression"
    wide = decide(BASE, candidate, noise=0.04)
    assert wide.effective_threshold == pytest.approx(0.12)
    assert wide.threshold == 0.05
    assert wide.ratio.low > wide.line
    assert wide.outcome == "pass"
    # A quiet baseline keeps the asked-for threshold.
    assert decide(BASE, candidate, noise=0.01).effective_threshold == 0.05


@pytest.mark.parametrize(("n_base", "n_cand", "reason"), [
    (2, 5, "too few repetitions: 2 baseline, 5 candidate"),
    (5, 2, "too few repetitions: 5 baseline, 2 candidate"),
    (3, 3, "too few repetitions for the test to reach alpha 0.02"),
    (3, 4, "its smallest p is 0.0286"),
])
def test_too_few_repetitions_is_inconclusive_even_for_a_big_drop(n_base, n_cand, reason):
    verdict = decide(BASE[:n_base], scaled(BASE, 0.5)[:n_cand])
    assert verdict.outcome == "inconclusive"
    assert reason in verdict.reasons[0]


def test_a_pinned_comparison_of_two_default_reproductions_says_how_many_repetitions_would_decide():
    # 3 against 3 (reproduce's default) cannot reach alpha 0.02; 4 against 4 can, and then decides.
    verdict = decide(BASE[:3], scaled(BASE, 0.5)[:3])
    assert "it needs 4 a side to decide (e.g. `reproduce --repetitions 4` for both)" in verdict.reasons[0]
    assert repetitions_needed(0.02) == 4 and smallest_p_value(4, 4) <= 0.02 < smallest_p_value(3, 3)
    assert decide(BASE[:4], scaled(BASE, 0.5)[:4]).outcome == "regression"


def test_enough_repetitions_in_all_can_decide_with_three_candidate_repetitions():
    baseline = [1000.0 + 5 * i for i in range(15)]
    assert smallest_p_value(15, 3) < 0.02
    assert decide(baseline, [850.0, 860.0, 855.0]).outcome == "regression"


def test_a_high_repetition_cv_is_inconclusive():
    noisy = [1000.0, 1300.0, 800.0, 1100.0, 900.0]
    verdict = decide(BASE, scaled(noisy, 0.7))
    assert verdict.candidate_cv > 0.10
    assert verdict.outcome == "inconclusive"
    assert verdict.reasons[0].startswith("candidate repetitions vary too much: CV")


def test_caller_problems_make_it_inconclusive_and_lead_the_reasons():
    verdict = decide(BASE, scaled(BASE, 0.8), problems=["candidate cell UNSTABLE: client starved"])
    assert verdict.outcome == "inconclusive"
    assert verdict.reasons[0] == "candidate cell UNSTABLE: client starved"
    assert "median ratio 0.800" in verdict.reasons[-1]


def test_a_ratio_below_the_line_without_the_test_is_inconclusive():
    # Median 6% down, but two candidate repetitions beat most of the baseline: p > alpha.
    candidate = [1008.0, 1003.0, 940.0, 930.0, 935.0]
    verdict = decide(BASE, candidate)
    assert verdict.ratio.point < verdict.line
    assert verdict.p_value > verdict.alpha
    assert verdict.outcome == "inconclusive"
    assert "test does not agree" in verdict.reasons[0]


def test_a_drop_beyond_the_line_not_shown_to_exceed_the_margin_is_inconclusive():
    # Every candidate repetition below every baseline repetition (p = 1/252), median 5.5% down, but
    # two repetitions sit within 3% of the baseline: "slower by more than 3%" is not shown.
    candidate = [975.0, 980.0, 945.0, 940.0, 935.0]
    verdict = decide(BASE, candidate)
    assert verdict.ratio.point < verdict.line
    assert verdict.p_value == pytest.approx(1 / 252)
    assert verdict.margin_p_value > verdict.alpha
    assert verdict.outcome == "inconclusive"
    assert "not yet show it slower by more than the 3% margin" in verdict.reasons[0]
    # Without a margin the same repetitions are the regression they would have been called before.
    assert decide(BASE, candidate, GateRule(margin=0.0)).outcome == "regression"


def test_a_significant_drop_whose_interval_reaches_the_line_is_inconclusive():
    # Every candidate repetition below every baseline repetition, median 4% down, one repetition 10% down.
    candidate = [900.0, 955.0, 960.0, 965.0, 985.0]
    verdict = decide(BASE, candidate)
    assert verdict.p_value <= verdict.alpha
    assert verdict.line < verdict.ratio.point
    assert verdict.ratio.low < verdict.line
    assert verdict.outcome == "inconclusive"
    assert "interval reaches" in verdict.reasons[0]


@pytest.mark.parametrize("bad", [[], [1000.0, 0.0, 990.0], [1000.0, math.nan, 990.0], [1000.0, -5.0, 990.0],
                                 [1000.0, math.inf, 990.0]])
def test_empty_zero_nan_or_negative_samples_are_value_errors(bad):
    with pytest.raises(ValueError):
        decide(BASE, bad)
    with pytest.raises(ValueError):
        decide(bad, BASE)


@pytest.mark.parametrize("kwargs", [{"threshold": 0.0}, {"threshold": 1.0}, {"alpha": 0.0}, {"min_repetitions": 1},
                                    {"max_repetition_cv": 0.0}, {"margin": -0.01}, {"margin": 0.05},
                                    {"margin_alpha": 0.0}])
def test_rule_parameters_out_of_range_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        GateRule(**kwargs)


@pytest.mark.parametrize("noise", [-0.01, math.nan])
def test_bad_noise_is_a_value_error(noise):
    with pytest.raises(ValueError, match="noise"):
        decide(BASE, BASE, noise=noise)


def test_between_night_noise_is_the_cv_of_the_nightly_medians():
    nights = [[990.0, 1000.0, 1010.0], [1090.0, 1100.0, 5000.0], [900.0, 950.0, 800.0]]
    # Medians 1000, 1100, 900: sd 100 over mean 1000.
    assert between_night_noise(nights) == pytest.approx(0.10)
    assert between_night_noise(nights[:1]) is None


def test_smallest_p_value_is_one_over_the_arrangements():
    assert smallest_p_value(5, 5) == pytest.approx(1 / 252)
    assert smallest_p_value(3, 3) == pytest.approx(1 / 20)


# Smaller sets than benchmarks/gate_statistics.py (1,000 each), with margins for the binomial noise.
def test_no_change_rarely_raises_a_false_alarm():
    rates = simulate_outcomes(drop=0.0, noise=0.03, repetitions=5, comparisons=200, seed=11)
    assert rates.regressions <= 4
    assert rates.passed >= 180


def test_a_true_ten_percent_drop_is_detected():
    rates = simulate_outcomes(drop=0.10, noise=0.03, repetitions=5, comparisons=200, seed=12)
    assert rates.regression_rate >= 0.92
    assert rates.passed <= 4


def test_a_three_percent_drop_under_the_threshold_is_seldom_called():
    rates = simulate_outcomes(drop=0.03, noise=0.03, repetitions=5, comparisons=200, seed=13)
    assert rates.regression_rate <= 0.10
    assert rates.passed + rates.inconclusive + rates.regressions == 200
    # The margin test is what holds it down: the same comparisons without it call more.
    unguarded = simulate_outcomes(drop=0.03, noise=0.03, repetitions=5, comparisons=200, seed=13,
                                  rule=GateRule(margin=0.0))
    assert unguarded.regressions > rates.regressions


def test_extra_repetitions_resolve_inconclusive_comparisons():
    once = simulate_outcomes(drop=0.10, noise=0.03, repetitions=5, comparisons=200, seed=12)
    extended = simulate_outcomes(drop=0.10, noise=0.03, repetitions=5, comparisons=200, seed=12, extra_repetitions=2)
    assert extended.extra_repetitions == 2
    assert extended.inconclusive < once.inconclusive
    assert extended.regressions > once.regressions
