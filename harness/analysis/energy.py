"""GPU figures of one run from its NVML samples (gpu.parquet): energy, power, utilisation, memory.

Pure functions over records.GPU_FIELDS; no I/O. Over the run's window (the makespan
window of harness.analysis.metrics, first send to last end of the ok requests):

- Energy: per GPU, NVML's energy counter (mJ since the driver loaded, Volta and later)
  read at the window's start and end, each interpolated linearly between the samples
  around it. When a GPU's counter readings do not bracket the window (unsupported,
  failed reads at an end, or a counter that went back), every GPU's sampled power is
  integrated instead (trapezoids, the window's ends interpolated), so one run's figure
  comes from one method; `energy_source` says which. NaN when neither brackets it.
- Joules per generated token: energy / generated tokens of the ok requests (padding
  included: the GPU spent the energy on it).
- Mean power: energy / window length, summed over GPUs.
- Mean utilisation: mean of NVML's utilisation over the samples inside the window and
  every GPU (NaN when no sample falls inside).
- Memory: per GPU, the peak `memory_used_bytes` over the samples from the last one at or
  before the window's start to the first one at or after its end (memory held before the
  run still counts); headroom = that GPU's total - its peak. With several GPUs the one
  with the least headroom is reported, its peak, total and headroom together.
- Read errors: samples whose `error` names a failed NVML reading, window or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

ENERGY_COUNTER = "energy counter"
INTEGRATED_POWER = "integrated power"
GIB = 2**30


@dataclass(frozen=True)
class GpuMetrics:
    """What a run's GPU samples say (see the module docstring); NaN where they cannot say."""

    gpus: int
    energy_j: float
    # ENERGY_COUNTER or INTEGRATED_POWER; empty when the energy is unknown.
    energy_source: str
    joules_per_generated_token: float
    mean_power_w: float
    mean_utilization: float
    peak_memory_used_gib: float
    memory_total_gib: float
    memory_headroom_gib: float
    read_errors: int


def gpu_metrics(gpu: pd.DataFrame, start_s: float, end_s: float, generated_tokens: int) -> GpuMetrics | None:
    """The GPU figures over [start_s, end_s] for `generated_tokens`; None without samples."""
    if gpu.empty:
        return None
    devices = [samples.sort_values("t") for _, samples in gpu.groupby("gpu")]
    energy, source = run_energy(devices, start_s, end_s)
    inside = gpu.loc[(gpu["t"] >= start_s) & (gpu["t"] <= end_s), "utilization"].dropna()
    peak, total = _tightest_memory(devices, start_s, end_s)
    duration = end_s - start_s
    return GpuMetrics(
        gpus=len(devices),
        energy_j=energy,
        energy_source=source,
        joules_per_generated_token=energy / generated_tokens if generated_tokens > 0 else math.nan,
        mean_power_w=energy / duration if duration > 0 else math.nan,
        mean_utilization=float(inside.mean()) if len(inside) else math.nan,
        peak_memory_used_gib=peak / GIB,
        memory_total_gib=total / GIB,
        memory_headroom_gib=(total - peak) / GIB,
        read_errors=int(gpu["error"].ne("").sum()),
    )


def run_energy(devices: list[pd.DataFrame], start_s: float, end_s: float) -> tuple[float, str]:
    """Joules every GPU used over the window, and the method; (NaN, "") when unknown."""
    counted = [counter_energy(d["t"].to_numpy(float), d["energy_j"].to_numpy(float), start_s, end_s) for d in devices]
    if all(math.isfinite(joules) for joules in counted):
        return float(sum(counted)), ENERGY_COUNTER
    integrated = [integrated_energy(d["t"].to_numpy(float), d["power_w"].to_numpy(float), start_s, end_s)
                  for d in devices]
    if all(math.isfinite(joules) for joules in integrated):
        return float(sum(integrated)), INTEGRATED_POWER
    return math.nan, ""


def counter_energy(t: npt.NDArray[np.float64], energy_j: npt.NDArray[np.float64], start_s: float,
                   end_s: float) -> float:
    """The counter's rise over [start_s, end_s]; NaN unless its readings bracket the window and never fall."""
    t, energy_j = _bracketing(t, energy_j, start_s, end_s)
    if t.size == 0 or np.any(np.diff(energy_j) < 0):
        return math.nan
    return float(np.interp(end_s, t, energy_j) - np.interp(start_s, t, energy_j))


def integrated_energy(t: npt.NDArray[np.float64], power_w: npt.NDArray[np.float64], start_s: float,
                      end_s: float) -> float:
    """Sampled power integrated over [start_s, end_s] (trapezoids); NaN unless the readings bracket it."""
    t, power_w = _bracketing(t, power_w, start_s, end_s)
    if t.size == 0:
        return math.nan
    inside = (t > start_s) & (t < end_s)
    times = np.concatenate(([start_s], t[inside], [end_s]))
    watts = np.concatenate(([np.interp(start_s, t, power_w)], power_w[inside], [np.interp(end_s, t, power_w)]))
    return float(np.trapezoid(watts, times))


def _bracketing(t: npt.NDArray[np.float64], values: npt.NDArray[np.float64], start_s: float,
                end_s: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The read (non-NaN) values, or none unless one is at or before start_s and one at or after end_s."""
    read = ~np.isnan(values)
    t, values = t[read], values[read]
    if not (t.size and t[0] <= start_s and t[-1] >= end_s):
        return t[:0], values[:0]
    return t, values


def _tightest_memory(devices: list[pd.DataFrame], start_s: float, end_s: float) -> tuple[float, float]:
    """(peak used, total) in bytes of the GPU with the least headroom; NaN when no GPU says."""
    best = (math.nan, math.nan)
    if not (math.isfinite(start_s) and math.isfinite(end_s)):
        return best
    for samples in devices:
        read = samples.dropna(subset=["memory_used_bytes", "memory_total_bytes"])
        t = read["t"].to_numpy(float)
        # From the last sample at or before the start to the first at or after the end.
        first = max(int(np.searchsorted(t, start_s, side="right")) - 1, 0)
        last = int(np.searchsorted(t, end_s, side="left"))
        window = read.iloc[first:last + 1]
        if window.empty:
            continue
        peak, total = float(window["memory_used_bytes"].max()), float(window["memory_total_bytes"].max())
        if math.isnan(best[0]) or total - peak < best[1] - best[0]:
            best = (peak, total)
    return best
