"""A job's vLLM servers placed on this host's GPUs (harness.placement), as the configs they launch with.

The cards come from NVML (harness.telemetry.gpu.gpu_inventory: none on a CPU host, where
nothing changes), the model's shape from its profile or its directory's config.json, and the
batch's context from the job's plans (the largest mean prompt plus output of its workloads).
Each server's config gains `--gpu-memory-utilization` and `CUDA_VISIBLE_DEVICES`, unless the
user set either: theirs is kept and nothing is placed. `ServerConfig.placement` (--placement)
forces one server at a time, or the servers side by side, on any host, a CPU one included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from harness.errors import UsageError
from harness.paper.physics import ModelShape
from harness.placement import Card, How, place_servers
from harness.workload.plan import build_plan
from harness.workload.spec import WorkloadSpec
from launchers.models import parse_profile_argument
from launchers.spec import ServerConfig

logger = logging.getLogger(__name__)

PARALLEL_FLAGS = {"tensor": ("--tensor-parallel-size", "-tp"), "data": ("--data-parallel-size", "-dp")}


@dataclass(frozen=True)
class PlacedServers:
    """A job's servers placed: each mode's config, and how they run, with why, in words (how None: side by side,
    nothing placed)."""

    configs: dict[str, ServerConfig]
    how: How | None = None
    why: str = ""

    @property
    def one_at_a_time(self) -> bool:
        """Whether the servers are up one after the other (harness.sweep.relay)."""
        return self.how == "one at a time"

    def line(self) -> str:
        """The placement in one line, for the log, each server.json and the report."""
        return f"{self.how}: {self.why}" if self.how else "side by side"


def job_placement(server: ServerConfig, modes: Sequence[str], workloads: Sequence[WorkloadSpec],
                  cards: Sequence[tuple[str, int]], batch_size: int | None = None) -> PlacedServers:
    """Each mode's config with its place on `cards`, and how they run; `server` unchanged for every mode where
    there is nothing to place (no GPU, the user's own placement, a model of unknown shape). UsageError where
    nothing fits.

    `batch_size`: the batch each server needs room for (None: `server.max_num_seqs`). A preset's continuous
    server runs at vLLM's own B within whatever KV cache its share leaves, as the published experiment ran it;
    the room placed for is then its static batch's.
    """
    forced = None if server.placement == "auto" else cast(How, server.placement.replace("-", " "))
    placed = _placed(server, modes, workloads, cards, batch_size, forced)
    if forced is not None and placed.how != forced and len(modes) > 1:
        # Nothing to place on the cards (a CPU host, the user's own placement): only the order is forced.
        placed = PlacedServers(placed.configs, forced, f"forced (--placement {server.placement}) on a host where"
                               f" {placed.line() if placed.how else 'both fit side by side'}")
    if placed.how is not None:
        logger.info(f"placement: {placed.line()}")
    return placed


def placed_configs(server: ServerConfig, modes: Sequence[str], workloads: Sequence[WorkloadSpec],
                   cards: Sequence[tuple[str, int]], batch_size: int | None = None) -> dict[str, ServerConfig]:
    """`job_placement`'s configs, for a job whose servers are up side by side: UsageError for one at a time."""
    placed = job_placement(server, modes, workloads, cards, batch_size)
    if placed.one_at_a_time:
        raise UsageError(f"placement: {placed.why}; this job keeps its servers up side by side (a static server"
                         " per B): run it with --placement shared, or give a larger tensor parallel")
    return placed.configs


def _placed(server: ServerConfig, modes: Sequence[str], workloads: Sequence[WorkloadSpec],
            cards: Sequence[tuple[str, int]], batch_size: int | None, forced: How | None) -> PlacedServers:
    unchanged = PlacedServers(dict.fromkeys(modes, server))
    if not cards or not modes:
        return unchanged
    if "--gpu-memory-utilization" in server.vllm_args or "CUDA_VISIBLE_DEVICES" in server.environment():
        logger.info("placement: as given (--gpu-memory-utilization or CUDA_VISIBLE_DEVICES set)")
        return unchanged
    shape = model_shape(server.model)
    if shape is None:
        logger.info(f"placement: the shape of {server.model} is not known here: vLLM's defaults, the servers side by"
                    " side (set --vllm-arg=--gpu-memory-utilization=... if they do not fit)")
        return unchanged
    placement = place_servers([Card(name, memory) for name, memory in cards], shape, modes,
                              batch_size or server.max_num_seqs,
                              context_tokens(workloads), tensor_parallel=parallel_size(server.vllm_args, "tensor"),
                              data_parallel=parallel_size(server.vllm_args, "data"), force=forced)
    return PlacedServers({place.mode: server.model_copy(update={
        "vllm_args": (*server.vllm_args, *place.vllm_args()),
        "server_env": (*server.server_env, *(f"{name}={value}" for name, value in place.environment().items())),
    }) for place in placement.servers}, placement.how, placement.why)


def model_shape(argument: str) -> ModelShape | None:
    """The shape of a model argument: a profile's (with its layers), a directory's config.json; None for a hub
    id or a config of another architecture."""
    profile = parse_profile_argument(argument)
    config = profile.config if profile is not None else _directory_config(Path(argument).expanduser())
    if config is None:
        return None
    try:
        return ModelShape.from_hf_config(profile.name if profile is not None else argument, config)
    except (KeyError, ValueError):
        return None


def context_tokens(workloads: Sequence[WorkloadSpec]) -> int:
    """The batch's context per sequence: the largest mean prompt plus output over the workloads' plans."""
    means = []
    for spec in workloads:
        requests = build_plan(spec).requests
        means.append(sum(r.prompt_tokens + r.output_tokens for r in requests) / len(requests))
    return max(1, round(max(means, default=1.0)))


def parallel_size(vllm_args: Sequence[str], kind: str) -> int:
    """The tensor or data parallel size the vLLM arguments ask for (last one wins; 1 where none)."""
    size = 1
    names = PARALLEL_FLAGS[kind]
    for i, arg in enumerate(vllm_args):
        name, equals, value = arg.partition("=")
        if name in names:
            text = value if equals else (vllm_args[i + 1] if i + 1 < len(vllm_args) else "")
            if not text.isdigit() or int(text) < 1:
                raise UsageError(f"--vllm-arg {name}: needs a whole number of at least 1, got {text!r}")
            size = int(text)
    return size


def _directory_config(path: Path) -> dict | None:
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        return json.loads(config.read_text())
    except (OSError, ValueError):
        return None
