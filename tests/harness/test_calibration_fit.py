"""Calibration fitting: medians over repetitions, a non-decreasing curve, the prefill slope."""

from __future__ import annotations

import dataclasses
import math

import pytest

from harness.analysis.metrics import Distribution, RunMetrics
from harness.calibration import calibration_batch_sizes, calibration_specs, fit_calibration, non_decreasing
from harness.errors import UsageError


def metrics(tpot_s: float, ttft_s: float) -> RunMetrics:
    """RunMetrics with only the fields the fit reads set meaningfully."""
    empty = Distribution.of([])
    fields = {f.name: (empty if f.type in ("Distribution", Distribution) else 0) for f in dataclasses.fields(RunMetrics)}
    fields.update(errors={}, tpot_s=Distribution.of([tpot_s]), ttft_s=Distribution.of([ttft_s]))
    return RunMetrics(**fields)


def test_batch_sizes_are_powers_of_two_and_b():
    assert calibration_batch_sizes(16) == [1, 2, 4, 8, 16]
    assert calibration_batch_sizes(12) == [1, 2, 4, 8, 12]
    assert calibration_batch_sizes(1) == [1]


def test_specs_are_closed_loops_of_b_users_with_fixed_lengths():
    specs = calibration_specs(4, prompt_tokens=32, output_tokens=64)
    assert sorted(specs) == [1, 2, 4]
    spec = specs[4]
    assert spec.arrival.users == 4 and spec.num_requests == 8
    assert spec.prompt_tokens.value == 32 and spec.output_tokens.value == 64


def test_non_decreasing_pools_adjacent_violators():
    assert non_decreasing([3.0, 4.0, 2.0, 5.0]) == [3.0, 3.0, 3.0, 5.0]
    assert non_decreasing([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0]
    assert non_decreasing([5.0, 1.0]) == [3.0, 3.0]


def test_fit_takes_medians_pools_and_fits_the_prefill_slope():
    # TTFT = 0.010 s + 50 us per admitted prompt token (b x 64 tokens).
    ttft = lambda b: 0.010 + 50e-6 * b * 64  # noqa: E731
    runs = {
        1: [metrics(0.003, ttft(1)), metrics(0.005, ttft(1)), metrics(0.004, ttft(1))],
        2: [metrics(0.0045, ttft(2))] * 3,
        4: [metrics(0.0020, ttft(4))] * 3,  # cheaper than b=2: noise, pooled
        8: [metrics(0.006, ttft(8))] * 3,
    }
    calibration = fit_calibration(runs, prompt_tokens=64, output_tokens=128)
    assert calibration.raw_points == {1: 0.004, 2: 0.0045, 4: 0.002, 8: 0.006}
    # Pooling 4.5 and 2.0 gives 3.25 < 4.0, so b=1 joins the pool: (4.0 + 4.5 + 2.0) / 3.
    assert [calibration.points[b] for b in (1, 2, 4)] == pytest.approx([0.0035] * 3)
    assert calibration.points[8] == 0.006
    assert calibration.prefill_s_per_token == pytest.approx(50e-6)
    model = calibration.step_model()
    assert model.step_time(8) == pytest.approx(0.006)


def test_fit_refuses_missing_or_unusable_runs():
    with pytest.raises(UsageError, match="no runs"):
        fit_calibration({}, 64, 128)
    with pytest.raises(UsageError, match="batch size"):
        fit_calibration({1: [metrics(math.nan, 0.01)]}, 64, 128)
