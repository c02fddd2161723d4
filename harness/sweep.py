"""A sweep: many (system, workload) runs against one server.

A sweep over spread levels is just a list of specs; each becomes one run directory
named `<system>-<workload>[-rN]` under the sweep's runs directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.driver.endpoint import EndpointInfo, warm_up
from harness.driver.runner import RunRequest, execute
from harness.workload import WorkloadSpec


@dataclass(frozen=True)
class SweepTarget:
    """The server a group of runs goes to, and what the runs need to talk to it."""

    endpoint: EndpointInfo
    tokenizer: Any
    batch_size: int
    server: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


def run_cells(
    target: SweepTarget,
    cells: Sequence[tuple[str, WorkloadSpec]],
    runs_dir: Path,
    repetitions: int,
    progress: Callable[[str], None],
) -> list[Path]:
    """Run each (system, spec) `repetitions` times; return the run directories.

    Repetitions are interleaved (every cell once, then every cell again), so a drift
    of the machine's speed lands on every cell alike instead of on one of them.
    """
    headers = target.headers or {}
    warm_up(target.endpoint, headers, target.batch_size, "hello " * 8)
    made = []
    for rep in range(repetitions):
        for system, spec in cells:
            suffix = f"-r{rep + 1}" if repetitions > 1 else ""
            out = runs_dir / f"{system}-{spec.name}{suffix}"
            progress(f"[{system}] {spec.name}{suffix}")
            execute(_request(target, spec, system, out, progress))
            made.append(out)
    return made


def _request(
    target: SweepTarget,
    spec: WorkloadSpec,
    system: str,
    out: Path,
    progress: Callable[[str], None],
) -> RunRequest:
    # The sweep warms the server once; each run then starts on compiled shapes.
    return RunRequest(
        spec=spec,
        system=system,
        batch_size=target.batch_size,
        endpoint=target.endpoint,
        tokenizer=target.tokenizer,
        out_dir=out,
        headers=target.headers or {},
        server=target.server,
        warmup=False,
        progress=lambda line: progress(f"    {line}"),
    )
