"""A sweep's runs: many (system, workload) cells, each run against its server in turn.

A sweep over spread levels is just a list of cells, each a (system, workload, server);
each run of a cell becomes one run directory named `<system>-<workload>[-rN]` under
the sweep's runs directory. Each run's progress lines (the runner's logger) are
indented under its cell's header line.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.driver.backends import TRANSFORMERS, check_distributable
from harness.driver.distributed.shard import ClusterSpec, check_workers
from harness.driver.endpoint import warm_up
from harness.driver.runner import RunRequest, execute
from harness.driver.runner import logger as run_logger
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.driver.work import DEFAULT_MAX_USERS, check_one_process, user_count
from harness.sweep.relay import announce_turns, in_turns
from harness.sweep.servers import SweepTarget
from harness.systems import HF_SYSTEMS
from harness.workload import WorkloadSpec, build_plan

logger = logging.getLogger(__name__)
RUN_INDENT = "    "
# The runner's periodic line, "k/N done, ...": the lines that carry the job's ETA.
_PROGRESS_LINE = re.compile(r"^\s*\d+/\d+ done, ")


@dataclass(frozen=True)
class SweepCell:
    """One system on one workload, and the server its runs go to."""

    system: str
    spec: WorkloadSpec
    target: SweepTarget
    # Put before each run directory's name ("": none): keeps apart the runs of two servers measuring
    # the same (system, workload), as `compare`'s A and B. The name is the run's id, so it must differ.
    prefix: str = ""
    # B of this cell's runs where it is not its server's (a preset's naive waves on the continuous server).
    batch_size: int | None = None


@dataclass(frozen=True)
class FinishedRun:
    """A run the sweep has made: its directory, its repetition and how long it took, wall clock."""

    path: Path
    repetition: int
    seconds: float
    cell: SweepCell
    # The last run of its repetition (servers up one at a time reorder a repetition's cells).
    last_of_repetition: bool = False


# What a progress line adds after its own text: where the whole job stands (None: nothing).
ProgressNote = Callable[[], "str | None"]


def iter_runs(
    cells: Sequence[SweepCell],
    runs_dir: Path,
    repetitions: int,
    first_repetition: int = 1,
    cluster: ClusterSpec | None = None,
    note: ProgressNote | None = None,
    alternate: bool = False,
) -> Iterator[FinishedRun]:
    """Run each cell `repetitions` times, in the order given, yielding each run as it finishes.

    `cluster`: every run's load goes through Locust's master and these workers (None: one process).
    `note`: called for every progress line; what it returns is appended to the line.
    `alternate`: every second repetition runs the cells in reverse order, so that cells given in
    pairs run A B, then B A, ...: neither side of a pair always runs first, on a warmer machine.

    Run directories are numbered from `first_repetition` (-r1, -r2, ...; no suffix for a
    single repetition numbered 1), so a later call can add repetitions beside earlier ones.

    Repetitions are interleaved (every cell once, then every cell again), across
    servers too: the servers stay up side by side (an idle vLLM server sleeps), so a
    drift of the machine's speed lands on every system alike, static included, instead
    of on the server that happened to run later. Servers up one at a time (harness.sweep.relay)
    keep the interleaving: each repetition runs its cells server by server, the server up first,
    each started (the other stopped) and warmed up when its cells come.

    Ctrl-C in a run: the run keeps its finished rows (harness.driver.runner.execute) and
    KeyboardInterrupt propagates; the runs yielded before it are whole.
    """
    # A relay warms each server at its start.
    targets = list({id(cell.target): cell.target for cell in cells if cell.target.slot is None}.values())
    for target in targets:
        warm_up(target.endpoint, target.headers or {}, target.batch_size, "hello " * 8, DEFAULT_STALL_TIMEOUT_S,
                backend=target.backend)
    announce_turns(cells, repetitions)
    for rep in range(first_repetition, first_repetition + repetitions):
        ordered = in_turns(cells[::-1] if alternate and (rep - first_repetition) % 2 else cells)
        for cell in ordered:
            # Its server started first, where the servers are up one at a time: the start's lines precede the run's.
            live = replace(cell, target=cell.target.live())
            suffix = f"-r{rep}" if repetitions > 1 or first_repetition > 1 else ""
            out = runs_dir / f"{cell.prefix}{cell.system}-{cell.spec.name}{suffix}"
            header = f"[{cell.prefix}{cell.system}] {cell.spec.name}{suffix}"
            where = note() if note else None
            logger.info(f"{header} ({where})" if where else header)
            began = time.monotonic()
            with _indented(run_logger, note):
                execute(_request(live, out, cluster))
            yield FinishedRun(out, rep, time.monotonic() - began, cell, cell is ordered[-1])


def run_cells(
    cells: Sequence[SweepCell],
    runs_dir: Path,
    repetitions: int,
    first_repetition: int = 1,
    cluster: ClusterSpec | None = None,
) -> list[Path]:
    """Every run of `iter_runs`, made in turn; their directories in order."""
    return [run.path for run in iter_runs(cells, runs_dir, repetitions, first_repetition, cluster)]


class _Indent(logging.Filter):
    """Prefixes each record's message, so a run's lines sit under its cell's header, and
    appends the job's progress note to lines that report progress."""

    def __init__(self, note: ProgressNote | None) -> None:
        super().__init__()
        self.note = note

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        where = self.note() if self.note and _PROGRESS_LINE.search(message) else None
        record.msg, record.args = RUN_INDENT + message + (f" | {where}" if where else ""), ()
        return True


@contextlib.contextmanager
def _indented(run_logger: logging.Logger, note: ProgressNote | None = None) -> Iterator[None]:
    indent = _Indent(note)
    run_logger.addFilter(indent)
    try:
        yield
    finally:
        run_logger.removeFilter(indent)


def _request(cell: SweepCell, out: Path, cluster: ClusterSpec | None) -> RunRequest:
    # The sweep warms the server once; each run then starts on compiled shapes.
    target = cell.target
    return RunRequest(
        spec=cell.spec,
        system=cell.system,
        batch_size=cell.batch_size or target.batch_size,
        endpoint=target.endpoint,
        tokenizer=target.tokenizer,
        out_dir=out,
        headers=target.headers or {},
        server=target.server,
        warmup=False,
        cluster=cluster,
        backend=target.backend,
        batch_wait_s=target.batch_wait_s,
    )


def check_sweep_workers(specs: Sequence[WorkloadSpec], systems: Sequence[str], batch_size: int,
                        cluster: ClusterSpec | None) -> None:
    """Refuse, before any server starts, a worker count some run of the sweep has too few users for,
    workers for a server other than vLLM, and workers for client-static (it forms its waves in one process)."""
    if cluster is None:
        return
    if any(system in HF_SYSTEMS for system in systems):
        check_distributable(TRANSFORMERS)
    for system in systems:
        check_one_process(system)
    for spec in specs:
        plan = build_plan(spec)
        for system in systems:
            check_workers(cluster.workers, user_count(plan, system, batch_size, DEFAULT_MAX_USERS))
