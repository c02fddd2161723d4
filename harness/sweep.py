"""A sweep: many (system, workload) runs against one or more servers.

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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.driver.backends import TRANSFORMERS, VLLM, Backend, check_distributable
from harness.driver.distributed.shard import ClusterSpec, check_workers
from harness.driver.endpoint import EndpointInfo, load_tokenizer, probe_endpoint, warm_up
from harness.driver.runner import RunRequest, execute
from harness.driver.runner import logger as run_logger
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.driver.work import DEFAULT_MAX_USERS, user_count
from harness.systems import HF_SYSTEMS, MODES, HfMode, Mode
from harness.workload import WorkloadSpec, build_plan
from launchers import start
from launchers.spec import Endpoints, ServerConfig, ServerSpec
from launchers.transformers_server import TransformersSpec, start_transformers

logger = logging.getLogger(__name__)
RUN_INDENT = "    "
# The runner's periodic line, "k/N done, ...": the lines that carry the job's ETA.
_PROGRESS_LINE = re.compile(r"^\s*\d+/\d+ done, ")


@dataclass(frozen=True)
class SweepTarget:
    """The server a group of runs goes to, and what the runs need to talk to it."""

    endpoint: EndpointInfo
    tokenizer: Any
    batch_size: int
    server: dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    # The kind of server: how its requests ask for their length and how tokens are counted.
    backend: Backend = VLLM


def run_targets(server: ServerConfig, out: Path, stack: contextlib.ExitStack, endpoints: Endpoints | None = None,
                modes: Sequence[Mode] = MODES, hf_modes: Sequence[HfMode] = ()) -> dict[Mode | HfMode, SweepTarget]:
    """The one place a job's servers come from: those given as `endpoints`, the others launched here.

    `modes`: the vLLM servers wanted; static is left out when only a continuous endpoint is
    given. One after the other, not side by side: each start is mostly imports and
    compilation, and both use every core, so two starts at once take as long as two in turn,
    and the second misses the compile cache the first fills
    (docs/validation/job-clock.md#server-start). `hf_modes`: `transformers serve` in those
    modes too. Every launched server stops when `stack` closes; B is the server's.
    """
    endpoints = endpoints or Endpoints()
    given: dict[Mode, str | None] = {"continuous": endpoints.continuous, "static": endpoints.static}
    wanted = [mode for mode in modes
              if not (mode == "static" and endpoints.continuous and not endpoints.static)]
    targets: dict[Mode | HfMode, SweepTarget] = {}
    for mode in wanted:
        server_info, url = None, given[mode]
        if url is None:
            launched = stack.enter_context(start(ServerSpec.of(server, mode), log_dir=out / "servers" / mode))
            url, server_info = launched.base_url, asdict(launched.info)
        # A launched server serves the model it was given; an endpoint must serve the one named.
        info = probe_endpoint(url, {}, endpoints.model if given[mode] else None)
        targets[mode] = SweepTarget(info, load_tokenizer(endpoints.tokenizer, info), server.max_num_seqs, server_info)
    # One after the other, beside the vLLM servers (an idle server takes no CPU).
    for hf_mode in hf_modes:
        targets[hf_mode] = transformers_target(stack, hf_mode, server, out / "servers" / hf_mode, endpoints.tokenizer)
    return targets


def transformers_target(stack: contextlib.ExitStack, mode: HfMode, config: ServerConfig, log_dir: Path,
                        tokenizer: str | None = None) -> SweepTarget:
    """Launch `transformers serve` in `mode` on `config`'s model and host, stopped when `stack` closes."""
    spec = TransformersSpec(mode=mode, model=config.model, host=config.host, startup_timeout_s=config.startup_timeout_s)
    server = stack.enter_context(start_transformers(spec, log_dir=log_dir))
    info = probe_endpoint(server.base_url, {}, server.served_model, TRANSFORMERS)
    return SweepTarget(info, load_tokenizer(tokenizer, info), config.max_num_seqs, asdict(server.info),
                       backend=TRANSFORMERS)


@dataclass(frozen=True)
class SweepCell:
    """One system on one workload, and the server its runs go to."""

    system: str
    spec: WorkloadSpec
    target: SweepTarget


@dataclass(frozen=True)
class FinishedRun:
    """A run the sweep has made: its directory, its repetition and how long it took, wall clock."""

    path: Path
    repetition: int
    seconds: float


# What a progress line adds after its own text: where the whole job stands (None: nothing).
ProgressNote = Callable[[], "str | None"]


def iter_runs(
    cells: Sequence[SweepCell],
    runs_dir: Path,
    repetitions: int,
    first_repetition: int = 1,
    cluster: ClusterSpec | None = None,
    note: ProgressNote | None = None,
) -> Iterator[FinishedRun]:
    """Run each cell `repetitions` times, in the order given, yielding each run as it finishes.

    `cluster`: every run's load goes through Locust's master and these workers (None: one process).
    `note`: called for every progress line; what it returns is appended to the line.

    Run directories are numbered from `first_repetition` (-r1, -r2, ...; no suffix for a
    single repetition numbered 1), so a later call can add repetitions beside earlier ones.

    Repetitions are interleaved (every cell once, then every cell again), across
    servers too: the servers stay up side by side (an idle vLLM server sleeps), so a
    drift of the machine's speed lands on every system alike, static included, instead
    of on the server that happened to run later.

    Ctrl-C in a run: the run keeps its finished rows (harness.driver.runner.execute) and
    KeyboardInterrupt propagates; the runs yielded before it are whole.
    """
    targets = list({id(cell.target): cell.target for cell in cells}.values())
    for target in targets:
        warm_up(target.endpoint, target.headers or {}, target.batch_size, "hello " * 8, DEFAULT_STALL_TIMEOUT_S,
                backend=target.backend)
    for rep in range(first_repetition, first_repetition + repetitions):
        for cell in cells:
            suffix = f"-r{rep}" if repetitions > 1 or first_repetition > 1 else ""
            out = runs_dir / f"{cell.system}-{cell.spec.name}{suffix}"
            header = f"[{cell.system}] {cell.spec.name}{suffix}"
            where = note() if note else None
            logger.info(f"{header} ({where})" if where else header)
            began = time.monotonic()
            with _indented(run_logger, note):
                execute(_request(cell.target, cell.spec, cell.system, out, cluster))
            yield FinishedRun(out, rep, time.monotonic() - began)


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


def _request(
    target: SweepTarget,
    spec: WorkloadSpec,
    system: str,
    out: Path,
    cluster: ClusterSpec | None,
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
        cluster=cluster,
        backend=target.backend,
    )


def check_sweep_workers(specs: Sequence[WorkloadSpec], systems: Sequence[str], batch_size: int,
                        cluster: ClusterSpec | None) -> None:
    """Refuse, before any server starts, a worker count some run of the sweep has too few users for,
    and workers for a server other than vLLM."""
    if cluster is None:
        return
    if any(system in HF_SYSTEMS for system in systems):
        check_distributable(TRANSFORMERS)
    for spec in specs:
        plan = build_plan(spec)
        for system in systems:
            check_workers(cluster.workers, user_count(plan, system, batch_size, DEFAULT_MAX_USERS))
