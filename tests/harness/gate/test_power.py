"""Outcome rates on repetitions whose noise is resampled from measured ones (harness.gate.power)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.gate.power import log_residuals, resample_outcomes


def test_residuals_are_each_repetitions_log_distance_from_its_sets_mean_unshrunk():
    residuals = log_residuals([[100.0, 110.0], [50.0], [80.0, 80.0, 80.0]])
    half = math.log(1.1) / 2 * math.sqrt(2)
    # The single-repetition set says nothing about noise and is skipped.
    assert residuals.tolist() == pytest.approx([-half, half, 0.0, 0.0, 0.0])


def test_residuals_need_a_set_of_two():
    with pytest.raises(ValueError, match="2 or more"):
        log_residuals([[100.0]])


def test_noisier_measured_repetitions_detect_a_drop_less_often():
    rng = np.random.default_rng(5)
    quiet = log_residuals(rng.lognormal(0.0, 0.02, (40, 5)).tolist())
    noisy = log_residuals(rng.lognormal(0.0, 0.06, (40, 5)).tolist())
    calm = resample_outcomes(0.10, quiet, repetitions=5, comparisons=200, seed=3)
    rough = resample_outcomes(0.10, noisy, repetitions=5, comparisons=200, seed=3)
    assert calm.noise == pytest.approx(0.02, rel=0.2) and rough.noise == pytest.approx(0.06, rel=0.2)
    assert calm.regression_rate >= 0.95
    assert rough.regression_rate < calm.regression_rate - 0.2


def test_no_change_in_resampled_repetitions_raises_no_false_alarm():
    rates = resample_outcomes(0.0, log_residuals([[100, 97, 104, 99, 101]] * 3), repetitions=5, comparisons=200, seed=4)
    assert rates.regressions <= 2


def test_resampling_needs_two_finite_residuals():
    with pytest.raises(ValueError, match="2 finite residuals"):
        resample_outcomes(0.1, np.array([0.01]), repetitions=5, comparisons=10, seed=1)
