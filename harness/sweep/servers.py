"""The servers a sweep's runs go to: those given as endpoints, the others launched here.

Each becomes a SweepTarget: the endpoint as probed, its tokenizer, B and the kind of server.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.driver.backends import BACKENDS, VLLM, Backend
from harness.driver.endpoint import EndpointInfo, check_max_num_seqs, load_tokenizer, probe_endpoint
from harness.errors import UsageError
from harness.sweep.placing import PlacedServers, job_placement
from harness.systems import MODES, ServerMode
from harness.telemetry.gpu import gpu_inventory
from harness.workload.prefixes import PREFIX_CACHE_ON
from launchers.handle import ServerProcess
from launchers.kinds import kind_of
from launchers.spec import Endpoints, ServerConfig

if TYPE_CHECKING:
    from harness.sweep.relay import Slot
    from harness.workload.spec import WorkloadSpec

logger = logging.getLogger(__name__)


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
    # client-static's waves wait this long for B arrivals (the static server's batch wait, kept by the client).
    batch_wait_s: float = 0.0
    # Its server's turn where the job's servers are up one at a time (harness.sweep.relay); None: up all along.
    slot: Slot | None = None

    def live(self) -> SweepTarget:
        """This target as its runs reach it: itself, or its server's, started if it is not the one up."""
        return self.slot.live() if self.slot is not None else self


def run_targets(server: ServerConfig, out: Path, stack: contextlib.ExitStack, endpoints: Endpoints | None = None,
                modes: Sequence[ServerMode] = MODES, workloads: Sequence[WorkloadSpec] = (),
                placed: PlacedServers | None = None) -> dict[ServerMode, SweepTarget]:
    """The one place a job's servers come from: those given as `endpoints`, the others launched here.

    `modes`: the servers wanted, of any kind (launchers.kinds); vLLM's static is left out
    when only a continuous endpoint is given. One after the other, not side by side: each
    start is mostly imports and compilation, and both use every core, so two starts at once
    take as long as two in turn, and the second misses the compile cache the first fills
    (docs/validation/job-clock.md#server-start). Every launched server stops when `stack`
    closes; B is the server's: an endpoint stating another B than `server.max_num_seqs` is a
    UsageError (check_max_num_seqs). The servers launched serve `workloads` as they ask
    (server_for), and on a GPU host each vLLM server is placed on the cards
    (harness.sweep.placing), unless `placed` gives each mode's config as a caller placed it
    (a job whose servers start at different times, placed together). Placed one at a time
    (or so forced), the vLLM servers launched are a relay (harness.sweep.relay): the first
    up now, each other one started in its runs' turn.
    """
    server = server_for(server, workloads)
    endpoints = endpoints or Endpoints()
    given: dict[ServerMode, str | None] = {"continuous": endpoints.continuous, "static": endpoints.static}
    wanted = [mode for mode in modes
              if not (mode == "static" and endpoints.continuous and not endpoints.static)]
    launching = [mode for mode in wanted if given.get(mode) is None and kind_of(mode).name == "vllm"]
    placement = placed if placed is not None else job_placement(server, launching, workloads,
                                                                gpu_inventory() if launching else [])
    configs = placement.configs
    targets: dict[ServerMode, SweepTarget] = {}
    if placement.one_at_a_time and len(launching) > 1:
        from harness.sweep.relay import Relay

        relay = Relay({mode: server_for(configs.get(mode, server), workloads) for mode in launching}, out, stack,
                      placement.line(), endpoints.tokenizer, server.batch_wait_s)
        targets.update(relay.targets(launching[0]))
    for mode in wanted:
        url = given.get(mode)
        if mode in targets:
            continue
        if url is None:
            config = server_for(configs.get(mode, server), workloads)
            launched = stack.enter_context(kind_of(mode).launch(config, mode, out / "servers" / mode))
            if placement.how is not None:
                launched.info.placement = placement.line()
                launched.write_info()
            targets[mode] = replace(launched_target(launched, config.max_num_seqs, endpoints.tokenizer),
                                    batch_wait_s=server.batch_wait_s)
            continue
        # An endpoint must serve the model named.
        backend = BACKENDS[endpoints.backend or VLLM.name]
        info = stated_context(probe_endpoint(url, {}, endpoints.model, backend), endpoints.max_model_len)
        check_max_num_seqs(info, server.max_num_seqs, {}, backend)
        targets[mode] = SweepTarget(info, load_tokenizer(endpoints.tokenizer, info), server.max_num_seqs,
                                    backend=backend, batch_wait_s=server.batch_wait_s)
    return targets


def stated_context(info: EndpointInfo, max_model_len: int | None) -> EndpointInfo:
    """`info` with the context the user states (--max-model-len) where the server states none.

    A server that states another context is a UsageError: the plans are checked against it
    (harness.driver.work.check_fits) before any load.
    """
    if max_model_len is None:
        return info
    if info.max_model_len is None:
        logger.info(f"context not stated by the server at {info.base_url}: taken from --max-model-len"
                    f" ({max_model_len} tokens)")
        return replace(info, max_model_len=max_model_len)
    if info.max_model_len != max_model_len:
        raise UsageError(f"--max-model-len {max_model_len} does not match the server at {info.base_url}, which"
                         f" states max_model_len {info.max_model_len}: pass --max-model-len {info.max_model_len}")
    logger.info(f"context = {max_model_len} tokens: stated by the server at {info.base_url}")
    return info


def server_for(server: ServerConfig, workloads: Sequence[WorkloadSpec]) -> ServerConfig:
    """`server` as `workloads` ask for it: with vLLM's prefix cache on where they say `prefix_cache`.

    A job's servers serve all its workloads, so workloads that disagree are a UsageError.
    """
    wanted = {spec.prefix_cache: spec.name for spec in workloads}
    if len(wanted) > 1:
        raise UsageError(f"prefix_cache: workload {wanted[True]} turns the prefix cache on and {wanted[False]} leaves"
                         " it off, and one job's servers serve both: run them as separate jobs")
    if True in wanted and PREFIX_CACHE_ON not in server.vllm_args:
        return server.model_copy(update={"vllm_args": (*server.vllm_args, PREFIX_CACHE_ON)})
    return server


def launched_target(server: ServerProcess, batch_size: int, tokenizer: str | None = None) -> SweepTarget:
    """How runs reach a server launched here: its endpoint as probed through its kind's backend, and B."""
    backend = BACKENDS[kind_of(server.info.mode).backend]
    # A server pinned to one model and listing none that names it is asked for that one.
    info = probe_endpoint(server.base_url, {}, None if backend.models_path else server.served_model, backend)
    return SweepTarget(info, load_tokenizer(tokenizer, info), batch_size,
                       asdict(server.info), backend=backend)
