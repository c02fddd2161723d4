"""GPU telemetry against a fake NVML: sampling, the energy counter and its fallback, errors, no GPU.

The fake hands out fake device handles whose readings follow one simulated clock, which
only the sampler's waits move; so the counts asserted do not depend on how fast a
loaded machine runs the sampler's thread. The last test opens the real library.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from harness.analysis.energy import ENERGY_COUNTER, INTEGRATED_POWER, gpu_metrics
from harness.rundir.records import GPU_FILE
from harness.telemetry.gpu import GPU_COLUMNS, NVML_ERROR_NOT_SUPPORTED, GpuSampler, gpu_inventory, write_gpu_table

GIB = 2**30
GPU_IS_LOST = 15


class FakeNvmlError(Exception):
    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


class FakeGpu:
    """A device handle: 300 W on its power sensor while its energy counter rises at 250 W (so the two
    methods give different joules), 12 of 80 GiB used, 70% busy."""

    def __init__(self, clock: Any, name: str = "NVIDIA H100 80GB HBM3", unsupported=(),
                 lost: tuple[float, float] | None = None) -> None:
        self.clock = clock
        self.name = name
        self.unsupported = set(unsupported)
        # Every read fails with GPU_IS_LOST while the clock is in [lost[0], lost[1]).
        self.lost = lost

    def read(self, reading: str, value):
        if reading in self.unsupported:
            raise FakeNvmlError(NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        if self.lost is not None and self.lost[0] <= self.clock.now < self.lost[1]:
            raise FakeNvmlError(GPU_IS_LOST, "GPU is lost")
        return value


class FakeNvml:
    """The pynvml functions the sampler calls, over fake handles."""

    NVMLError = FakeNvmlError

    def __init__(self, gpus: list[FakeGpu], init_error: FakeNvmlError | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str:
        return handle.name

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu):
        return handle.read("utilization", SimpleNamespace(gpu=70, memory=40))

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu):
        return handle.read("memory", SimpleNamespace(used=12 * GIB, free=68 * GIB, total=80 * GIB))

    def nvmlDeviceGetPowerUsage(self, handle: FakeGpu) -> int:
        return handle.read("power", 300_000)  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGpu) -> int:
        return handle.read("energy", round(5e6 + 250_000 * (handle.clock.now - 1000.0)))  # mJ


def sample_for(time_: Any, nvml: FakeNvml, interval_s: float = 0.25) -> GpuSampler:
    """Start a sampler on `nvml`, let the simulated time pass to its horizon, stop it."""
    sampler = GpuSampler(interval_s, nvml=lambda: nvml, clock=time_, timer=time_, wait=time_.wait).start()
    if sampler.info.devices:
        assert time_.parked.wait(timeout=30)
    sampler.stop()
    return sampler


def test_every_gpu_is_sampled_at_start_on_the_interval_and_after_stop(sampler_time):
    time_ = sampler_time(horizon_s=1.0)
    nvml = FakeNvml([FakeGpu(time_), FakeGpu(time_, name="NVIDIA H100 PCIe")])
    sampler = sample_for(time_, nvml)
    rows = pd.DataFrame([vars(sample) for sample in sampler.samples], columns=GPU_COLUMNS)
    # Samples at 0, 0.25, 0.5, 0.75, 1.0 s, and the one after stop(): six per GPU.
    assert rows.groupby("gpu").size().to_dict() == {0: 6, 1: 6}
    assert rows["t"].min() == 1000.0 and rows["t"].max() == 1001.0
    first = rows.iloc[0]
    assert (first.utilization, first.memory_used_bytes, first.memory_total_bytes, first.power_w, first.energy_j) == (
        0.7, 12 * GIB, 80 * GIB, 300.0, 5000.0)
    assert (rows["error"] == "").all() and sampler.errors == 0
    assert sampler.info.devices == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]
    assert sampler.info.memory_bytes == [80 * GIB, 80 * GIB]
    assert sampler.info.inventory == "1 x NVIDIA H100 80GB HBM3 (80.0 GiB), 1 x NVIDIA H100 PCIe (80.0 GiB)"
    assert sampler.info.note == ("GPU telemetry: 2 GPUs (NVIDIA H100 80GB HBM3, NVIDIA H100 PCIe) read through NVML"
                                 " every 0.25 s")
    assert nvml.shutdowns == 1


def run_energy(tmp_path: Path, sampler: GpuSampler):
    """gpu.parquet as the runner writes it, read back, over a run from 1000.1 to 1000.9 s with 100 tokens."""
    write_gpu_table(tmp_path, sampler.samples)
    return gpu_metrics(pd.read_parquet(tmp_path / GPU_FILE), 1000.1, 1000.9, generated_tokens=100)


def test_joules_come_from_the_energy_counter_where_the_gpu_has_one(tmp_path, sampler_time):
    time_ = sampler_time(horizon_s=1.0)
    m = run_energy(tmp_path, sample_for(time_, FakeNvml([FakeGpu(time_)])))
    # The counter rises at 250 W: 200 J over 0.8 s (the power sensor's 300 W would give 240 J).
    assert m.energy_source == ENERGY_COUNTER and m.energy_j == pytest.approx(200.0)
    assert m.joules_per_generated_token == pytest.approx(2.0)
    assert (m.peak_memory_used_gib, m.memory_headroom_gib, m.mean_utilization) == pytest.approx((12.0, 68.0, 0.7))


def test_a_gpu_without_the_counter_is_not_asked_again_and_its_power_is_integrated(tmp_path, sampler_time):
    time_ = sampler_time(horizon_s=1.0)
    sampler = sample_for(time_, FakeNvml([FakeGpu(time_, name="Tesla P100", unsupported={"energy"})]))
    assert sampler.info.note.endswith("; not supported: energy on GPU 0")
    # Unsupported is not an error: the column is NaN, the error column empty.
    assert all(math.isnan(s.energy_j) and s.error == "" for s in sampler.samples) and sampler.errors == 0
    m = run_energy(tmp_path, sampler)
    assert m.energy_source == INTEGRATED_POWER and m.energy_j == pytest.approx(240.0)


def test_nvml_errors_mid_run_are_recorded_in_their_rows_and_sampling_goes_on(tmp_path, sampler_time):
    time_ = sampler_time(horizon_s=1.0)
    sampler = sample_for(time_, FakeNvml([FakeGpu(time_, lost=(1000.4, 1000.6))]))
    failed = [s for s in sampler.samples if s.error]
    # The sample at 0.5 s lost every reading; the ones before and after read all four.
    assert [s.t for s in failed] == [1000.5]
    assert failed[0].error == ("utilization: GPU is lost; memory: GPU is lost; power: GPU is lost;"
                               " energy: GPU is lost")
    assert math.isnan(failed[0].power_w) and len(sampler.samples) == 6
    assert sampler.errors == 4 and sampler.info.errors == 4
    # The counter still brackets the window: its joules stand.
    m = run_energy(tmp_path, sampler)
    assert m.energy_source == ENERGY_COUNTER and m.energy_j == pytest.approx(200.0) and m.read_errors == 1


@pytest.mark.parametrize(("nvml", "reason"), [
    (lambda: FakeNvml([]), "NVML sees no GPU on this machine"),
    (lambda: FakeNvml([], init_error=FakeNvmlError(9, "Driver Not Loaded")),
     "NVML did not start (Driver Not Loaded): no NVIDIA driver on this machine"),
])
def test_no_gpu_is_one_line_and_no_samples(nvml, reason, sampler_time):
    time_ = sampler_time(horizon_s=1.0)
    sampler = GpuSampler(nvml=nvml, clock=time_, timer=time_, wait=time_.wait)
    with sampler:
        pass
    assert sampler.samples == [] and sampler.info.devices == []
    assert sampler.info.note == f"no GPU telemetry: {reason}"


def test_the_inventory_lists_each_card_with_its_memory_and_nothing_where_nvml_cannot_be_read(sampler_time):
    nvml = FakeNvml([FakeGpu(sampler_time(horizon_s=0.0)), FakeGpu(None, name="NVIDIA L4")])
    assert gpu_inventory(lambda: nvml) == [("NVIDIA H100 80GB HBM3", 80 * GIB), ("NVIDIA L4", 80 * GIB)]
    assert nvml.shutdowns == 1
    driverless = FakeNvml([], init_error=FakeNvmlError(9, "Driver Not Loaded"))

    def missing():
        raise ImportError("No module named 'pynvml'")

    assert gpu_inventory(lambda: driverless) == [] and gpu_inventory(missing) == []


def test_without_the_library_it_says_so():
    def missing():
        raise ImportError("No module named 'pynvml'")

    with GpuSampler(nvml=missing) as sampler:
        pass
    assert sampler.info.note == "no GPU telemetry: nvidia-ml-py (module pynvml) is not installed"


def test_a_server_on_another_machine_is_not_read_from_here():
    def never():
        raise AssertionError("NVML opened for a remote server")

    with GpuSampler(server_url="http://gpu-box:8000", nvml=never) as sampler:
        pass
    assert sampler.info.note.startswith("no GPU telemetry: the server (gpu-box) runs on another machine")
    with GpuSampler(server_url="http://127.0.0.1:8000", nvml=lambda: FakeNvml([])) as local:
        pass
    assert local.info.note == "no GPU telemetry: NVML sees no GPU on this machine"


def test_the_real_library_opens_and_says_what_it_found():
    pytest.importorskip("pynvml")
    with GpuSampler(interval_s=0.05) as sampler:
        pass
    if Path("/proc/driver/nvidia").exists():
        assert sampler.info.devices and sampler.samples
    else:
        # This machine has no NVIDIA driver: NVML cannot load its shared library.
        assert sampler.samples == [] and sampler.info.note.startswith("no GPU telemetry: NVML did not start (")
