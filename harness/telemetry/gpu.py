"""GPU telemetry: utilisation, memory, power and energy read through NVML while a run goes.

NVIDIA's management library (PyPI `nvidia-ml-py`, module `pynvml`) is read for every
GPU of this machine, beside the engine's steps, so a GPU run can say what its tokens
cost in joules and how much device memory it left free. Samples are stamped with
`time.time()`, the clock of the request records, and paced on `time.monotonic()`.

Where nothing can be read (the library not installed, no NVIDIA driver, no GPU, or a
server on another machine, whose GPUs NVML cannot see) the sampler takes nothing and
says why in one line (`info.note`); it never raises. A reading that fails mid-run is
named in its row's `error` and counted, and the other readings go on. The library, the
clocks and the wait between samples are injected, so tests run on a fake device
handle and simulated time.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir.manifest import GpuTelemetry
from harness.rundir.records import GPU_FIELDS, GPU_FILE, GPU_SCHEMA

DEFAULT_INTERVAL_S = 0.25
# NVML's return code for a query the device does not implement (e.g. the energy counter before Volta).
NVML_ERROR_NOT_SUPPORTED = 3


class Nvml(Protocol):
    """The part of `pynvml` the sampler uses (the module itself, or a fake in tests)."""

    @property
    def NVMLError(self) -> type[Exception]: ...

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int: ...


@dataclass(frozen=True)
class GpuSample:
    """One GPU read once; NaN for a reading that failed or that the GPU does not support."""

    t: float
    gpu: int
    utilization: float
    memory_used_bytes: float
    memory_total_bytes: float
    power_w: float
    energy_j: float
    latency_s: float
    error: str


GPU_COLUMNS = tuple(GpuSample.__dataclass_fields__)
# The schema (harness.rundir.records) is the reference; the sampler follows it.
assert tuple(GPU_FIELDS) == GPU_COLUMNS, "sampler out of step with the GPU schema"


def _memory_total(nvml: Nvml, handle: Any) -> int:
    """A GPU's memory in bytes, 0 where NVML cannot read it."""
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    except nvml.NVMLError:
        return 0


def _utilization(nvml: Nvml, handle: Any) -> dict[str, float]:
    return {"utilization": nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100}


def _memory(nvml: Nvml, handle: Any) -> dict[str, float]:
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    return {"memory_used_bytes": float(memory.used), "memory_total_bytes": float(memory.total)}


def _power(nvml: Nvml, handle: Any) -> dict[str, float]:
    return {"power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1e3}  # mW


def _energy(nvml: Nvml, handle: Any) -> dict[str, float]:
    return {"energy_j": nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3}  # mJ


# Each reading by the name its errors carry, and the columns it fills.
READINGS: dict[str, Callable[[Nvml, Any], dict[str, float]]] = {
    "utilization": _utilization,
    "memory": _memory,
    "power": _power,
    "energy": _energy,
}
_UNREAD = dict.fromkeys(("utilization", "memory_used_bytes", "memory_total_bytes", "power_w", "energy_j"), float("nan"))


def write_gpu_table(out_dir: Path, samples: list[GpuSample]) -> None:
    """Write gpu.parquet: every sample of the run, one row per GPU per sample."""
    rows = [asdict(sample) for sample in samples]
    pq.write_table(pa.Table.from_pylist(rows, schema=GPU_SCHEMA), out_dir / GPU_FILE)


def import_pynvml() -> Nvml:
    """The real library; ImportError when nvidia-ml-py is not installed."""
    # Imported by name, not statically: the module ships no type information, and Nvml types what is used.
    return cast(Nvml, importlib.import_module("pynvml"))


def is_this_machine(base_url: str) -> bool:
    """Whether the server at `base_url` runs here: a loopback address, or this host's own name.

    Names are compared, not resolved: a lookup may wait seconds on a machine without DNS.
    """
    host = urlsplit(base_url).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in ("localhost", socket.gethostname())


@dataclass
class _Device:
    index: int
    handle: Any
    # Readings the device answered NOT_SUPPORTED to when opened: never asked again, left NaN.
    unsupported: frozenset[str]


class GpuSampler:
    """A background thread that reads every GPU every `interval_s` until stopped; a context manager.

    `info` says what was sampled, or why nothing was, from start() on; its error count is
    final once stopped.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        server_url: str | None = None,
        *,
        nvml: Callable[[], Nvml] = import_pynvml,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], bool] = threading.Event.wait,
    ) -> None:
        """Read GPUs every `interval_s` once started, when `server_url` (if given) is on this machine.

        `nvml` loads the library (ImportError: not installed); `clock` stamps the samples
        (the records' wall clock); `timer` paces them and times each read; `wait(stop_event,
        seconds)` waits between samples, returning early once stopped.
        """
        self.interval_s = interval_s
        self.server_url = server_url
        self.samples: list[GpuSample] = []
        self.errors = 0
        self.info = GpuTelemetry(note="no GPU telemetry: not started")
        self._load = nvml
        self._clock = clock
        self._timer = timer
        self._wait = wait
        self._nvml: Nvml | None = None
        self._devices: list[_Device] = []
        self._stop = threading.Event()
        self._first_sample = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)

    def start(self) -> GpuSampler:
        """Open NVML and start sampling, returning once the first sample is in; or say why not."""
        absent = self._open()
        if absent is not None:
            self.info = GpuTelemetry(note=f"no GPU telemetry: {absent}")
            return self
        assert self._nvml is not None
        names = [_name(self._nvml, device.handle) for device in self._devices]
        unsupported = [
            f"{reading} on GPU {device.index}" for device in self._devices for reading in sorted(device.unsupported)
        ]
        self.info = GpuTelemetry(
            note=(
                f"GPU telemetry: {len(names)} GPU{'s' if len(names) > 1 else ''} ({', '.join(names)}) read through"
                f" NVML every {self.interval_s:g} s"
                + (f"; not supported: {', '.join(unsupported)}" if unsupported else "")
            ),
            devices=names,
            memory_bytes=[_memory_total(self._nvml, device.handle) for device in self._devices],
            interval_s=self.interval_s,
        )
        self._thread.start()
        self._first_sample.wait(timeout=10)
        return self

    def stop(self) -> list[GpuSample]:
        """Take a last sample, stop, shut NVML down, and return every sample taken."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()
        if self._nvml is not None:
            _shutdown(self._nvml)
            self._nvml = None
        self.info = self.info.model_copy(update={"errors": self.errors})
        return self.samples

    def __enter__(self) -> GpuSampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _open(self) -> str | None:
        """Load and start NVML and find the GPUs; the reason there is nothing to read, else None."""
        if self.server_url is not None and not is_this_machine(self.server_url):
            host = urlsplit(self.server_url).hostname
            return f"the server ({host}) runs on another machine, whose GPUs NVML cannot see from here"
        opened = _open_nvml(self._load)
        if isinstance(opened, str):
            return opened
        nvml, handles = opened
        try:
            devices = [_Device(i, handle, _unsupported(nvml, handle)) for i, handle in enumerate(handles)]
        except nvml.NVMLError as exc:
            _shutdown(nvml)
            return f"NVML could not list the GPUs ({exc})"
        self._nvml, self._devices = nvml, devices
        return None

    def _loop(self) -> None:
        next_sample = self._timer()
        while True:
            self._sample()
            self._first_sample.set()
            # The sample after stop() covers the run's end, as the first covers its start.
            if self._stop.is_set():
                break
            next_sample += self.interval_s
            self._wait(self._stop, max(0.0, next_sample - self._timer()))

    def _sample(self) -> None:
        assert self._nvml is not None
        for device in self._devices:
            asked = self._timer()
            values = dict(_UNREAD)
            errors = []
            for name, read in READINGS.items():
                if name in device.unsupported:
                    continue
                try:
                    values.update(read(self._nvml, device.handle))
                except self._nvml.NVMLError as exc:
                    errors.append(f"{name}: {exc}")
            self.errors += len(errors)
            self.samples.append(GpuSample(
                t=self._clock(), gpu=device.index, latency_s=self._timer() - asked, error="; ".join(errors), **values
            ))


def _unsupported(nvml: Nvml, handle: Any) -> frozenset[str]:
    """The readings this device answers NOT_SUPPORTED to; any other error is left to the samples."""
    missing = set()
    for name, read in READINGS.items():
        try:
            read(nvml, handle)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == NVML_ERROR_NOT_SUPPORTED:
                missing.add(name)
    return frozenset(missing)


def _shutdown(nvml: Nvml) -> None:
    # Whatever was read stays read: a failed shutdown changes none of it.
    with contextlib.suppress(nvml.NVMLError):
        nvml.nvmlShutdown()


def _name(nvml: Nvml, handle: Any) -> str:
    try:
        name = nvml.nvmlDeviceGetName(handle)
    except nvml.NVMLError:
        return "unnamed GPU"
    # Older nvidia-ml-py releases return bytes.
    return name.decode() if isinstance(name, bytes) else str(name)


def gpu_inventory(nvml: Callable[[], Nvml] = import_pynvml) -> list[tuple[str, int]]:
    """This machine's GPUs as NVML lists them, (name, memory in bytes) by index; [] where NVML
    cannot be read (no library, no driver, no GPU)."""
    opened = _open_nvml(nvml)
    if isinstance(opened, str):
        return []
    library, handles = opened
    try:
        return [(_name(library, handle), _memory_total(library, handle)) for handle in handles]
    except library.NVMLError:
        return []
    finally:
        _shutdown(library)


def _open_nvml(load: Callable[[], Nvml]) -> tuple[Nvml, list[Any]] | str:
    """NVML started and every GPU's handle; or why not, in words (NVML shut again where it had started)."""
    try:
        nvml = load()
    except ImportError:
        return "nvidia-ml-py (module pynvml) is not installed"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return f"NVML did not start ({exc}): no NVIDIA driver on this machine"
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except nvml.NVMLError as exc:
        _shutdown(nvml)
        return f"NVML could not list the GPUs ({exc})"
    if not handles:
        _shutdown(nvml)
        return "NVML sees no GPU on this machine"
    return nvml, handles
