"""The servers a sweep's runs go to: those given as endpoints, the others launched here.

Each becomes a SweepTarget: the endpoint as probed, its tokenizer, B and the kind of server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.driver.backends import TRANSFORMERS, VLLM, Backend
from harness.driver.endpoint import EndpointInfo, check_max_num_seqs, load_tokenizer, probe_endpoint
from harness.systems import MODES, HfMode, Mode
from launchers import ServerHandle, start
from launchers.spec import Endpoints, ServerConfig, ServerSpec
from launchers.transformers_server import TransformersSpec, start_transformers


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
    modes too. Every launched server stops when `stack` closes; B is the server's: an endpoint
    stating another B than `server.max_num_seqs` is a UsageError (check_max_num_seqs).
    """
    endpoints = endpoints or Endpoints()
    given: dict[Mode, str | None] = {"continuous": endpoints.continuous, "static": endpoints.static}
    wanted = [mode for mode in modes
              if not (mode == "static" and endpoints.continuous and not endpoints.static)]
    targets: dict[Mode | HfMode, SweepTarget] = {}
    for mode in wanted:
        url = given[mode]
        if url is None:
            launched = stack.enter_context(start(ServerSpec.of(server, mode), log_dir=out / "servers" / mode))
            targets[mode] = launched_target(launched, endpoints.tokenizer)
            continue
        # An endpoint must serve the model named.
        info = probe_endpoint(url, {}, endpoints.model)
        check_max_num_seqs(info, server.max_num_seqs)
        targets[mode] = SweepTarget(info, load_tokenizer(endpoints.tokenizer, info), server.max_num_seqs)
    # One after the other, beside the vLLM servers (an idle server takes no CPU).
    for hf_mode in hf_modes:
        targets[hf_mode] = transformers_target(stack, hf_mode, server, out / "servers" / hf_mode, endpoints.tokenizer)
    return targets


def launched_target(server: ServerHandle, tokenizer: str | None = None) -> SweepTarget:
    """How runs reach a vLLM server launched here: its endpoint as probed, and B as it was started with."""
    info = probe_endpoint(server.base_url, {}, None)
    return SweepTarget(info, load_tokenizer(tokenizer, info), server.info.max_num_seqs, asdict(server.info))


def transformers_target(stack: contextlib.ExitStack, mode: HfMode, config: ServerConfig, log_dir: Path,
                        tokenizer: str | None = None) -> SweepTarget:
    """Launch `transformers serve` in `mode` on `config`'s model and host, stopped when `stack` closes."""
    spec = TransformersSpec(mode=mode, model=config.model, host=config.host, startup_timeout_s=config.startup_timeout_s)
    server = stack.enter_context(start_transformers(spec, log_dir=log_dir))
    info = probe_endpoint(server.base_url, {}, server.served_model, TRANSFORMERS)
    return SweepTarget(info, load_tokenizer(tokenizer, info), config.max_num_seqs, asdict(server.info),
                       backend=TRANSFORMERS)
