"""GPU figures from NVML samples: energy by counter or integrated power, memory headroom, utilisation."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.energy import ENERGY_COUNTER, GIB, INTEGRATED_POWER, gpu_metrics

NAN = math.nan


def samples(gpu=0, t=(0.0, 1.0, 2.0, 3.0), energy=(0.0, 100.0, 300.0, 600.0), power=(100.0,) * 4,
            used=(10.0,) * 4, total=80.0, utilization=(0.5,) * 4, error=("",) * 4):
    """One GPU's rows (memory in GiB here, bytes in the frame)."""
    return pd.DataFrame({
        "t": t, "gpu": gpu, "utilization": utilization, "memory_used_bytes": [u * GIB for u in used],
        "memory_total_bytes": total * GIB, "power_w": power, "energy_j": energy, "latency_s": 0.001, "error": error,
    })


def test_the_energy_counter_is_read_at_the_window_ends_interpolated_between_samples():
    m = gpu_metrics(samples(), 0.5, 2.5, generated_tokens=200)
    # Counter at 2.5 s: 450 J; at 0.5 s: 50 J.
    assert m.energy_source == ENERGY_COUNTER and m.energy_j == pytest.approx(400.0)
    assert m.joules_per_generated_token == pytest.approx(2.0)
    assert m.mean_power_w == pytest.approx(200.0)


def test_a_counter_read_that_failed_mid_run_leaves_the_counter_path_in_use():
    m = gpu_metrics(samples(energy=(0.0, NAN, 300.0, 600.0), error=("", "energy: GPU is lost", "", "")), 0.5, 2.5, 1)
    # Linear between 0 J at 0 s and 300 J at 2 s: 75 J at 0.5 s; 450 J at 2.5 s.
    assert m.energy_source == ENERGY_COUNTER and m.energy_j == pytest.approx(450.0 - 75.0)
    assert m.read_errors == 1


def test_sampled_power_is_integrated_when_the_counter_does_not_bracket_the_window():
    # No counter reading after the window's end (unsupported, or the last reads failed).
    rows = samples(energy=(0.0, 100.0, 300.0, NAN), power=(0.0, 100.0, 100.0, 0.0))
    m = gpu_metrics(rows, 0.5, 2.5, generated_tokens=175)
    # Trapezoids: 0.5-1 s from 50 to 100 W, 1-2 s at 100 W, 2-2.5 s from 100 to 50 W.
    assert m.energy_source == INTEGRATED_POWER and m.energy_j == pytest.approx(37.5 + 100.0 + 37.5)
    assert m.joules_per_generated_token == pytest.approx(1.0)


def test_a_counter_that_went_back_is_not_trusted():
    # The driver reloaded mid-run: the counter restarted from zero.
    m = gpu_metrics(samples(energy=(500.0, 600.0, 10.0, 110.0)), 0.5, 2.5, 1)
    assert m.energy_source == INTEGRATED_POWER and m.energy_j == pytest.approx(200.0)


def test_one_gpu_without_a_counter_puts_every_gpu_on_integrated_power():
    rows = pd.concat([samples(gpu=0), samples(gpu=1, energy=(NAN,) * 4, power=(50.0,) * 4)])
    m = gpu_metrics(rows, 0.5, 2.5, 1)
    assert m.gpus == 2 and m.energy_source == INTEGRATED_POWER
    assert m.energy_j == pytest.approx(100.0 * 2 + 50.0 * 2)


def test_energy_is_unknown_when_nothing_brackets_the_window():
    m = gpu_metrics(samples(energy=(NAN,) * 4), 0.5, 3.5, generated_tokens=10)
    assert m.energy_source == "" and math.isnan(m.energy_j) and math.isnan(m.joules_per_generated_token)


def test_memory_reports_the_gpu_with_the_least_headroom_over_the_bracketed_window():
    roomy = samples(gpu=0, used=(5.0, 20.0, 30.0, 70.0), total=80.0)  # 70 GiB is after the window's bracket
    tight = samples(gpu=1, t=(0.0, 1.0, 2.0, 3.0, 4.0), energy=(0.0,) * 5, power=(1.0,) * 5,
                    used=(39.0, 30.0, 35.0, 38.0, 39.5), total=40.0, utilization=(0.0,) * 5, error=("",) * 5)
    m = gpu_metrics(pd.concat([roomy, tight]), 1.5, 2.5, 1)
    # GPU 0 between its samples at 1 s and 3 s peaks at 70 GiB: 10 GiB left. GPU 1 peaks at 38 of 40: 2 GiB left.
    assert (m.peak_memory_used_gib, m.memory_total_gib, m.memory_headroom_gib) == pytest.approx((38.0, 40.0, 2.0))


def test_mean_utilisation_counts_only_samples_inside_the_window():
    m = gpu_metrics(samples(utilization=(0.0, 0.9, 0.7, 0.0)), 0.5, 2.5, 1)
    assert m.mean_utilization == pytest.approx(0.8)


def test_no_samples_give_no_gpu_figures_and_no_ok_request_gives_nan_ones():
    assert gpu_metrics(samples().iloc[:0], 0.5, 2.5, 1) is None
    m = gpu_metrics(samples(), NAN, NAN, 0)
    assert m.gpus == 1 and math.isnan(m.energy_j) and math.isnan(m.peak_memory_used_gib)
