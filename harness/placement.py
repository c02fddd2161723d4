"""Where a job's servers run on a GPU host: a pure function of the cards, the model and the batch.

A job keeps one server per mode (continuous and static) so that their runs interleave. On a
GPU each server is vLLM asking for its `gpu_memory_utilization` share of every card it spans
(tensor parallel: `tensor_parallel` cards, weights split across them). A server needs, per
card: its share of the weights, vLLM's profiled allowances (activation peak, memory outside
PyTorch: harness.paper.physics.MemoryAllowance) and the KV cache for the batch, B sequences
of `context_tokens` each. Three placements, tried in this order:
- one card each: enough cards for every server's tensor-parallel group, each server on its
  own (CUDA_VISIBLE_DEVICES), at vLLM's default share;
- shared: the servers on the same cards, each at an equal share of `SHARED_UTILIZATION`,
  when every server's need fits its share;
- one at a time: a single server fits the cards but two do not: each system's server is
  started alone, at the default share, and restarted between systems.
`force` (the jobs' --placement) puts the servers one at a time, or shared, whatever fits: to
measure a placement on a host that does not need it. A model that does not fit even alone is
a UsageError naming what it needs. So is static
mode with data parallelism: each data-parallel rank runs its own scheduler, and the static
plugin's batch is per scheduler, so B would be per rank, not the server's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.errors import UsageError
from harness.paper.physics import MemoryAllowance, ModelShape, kv_bytes_per_token

# vLLM's own default --gpu-memory-utilization: what a server alone on its cards asks for.
DEFAULT_UTILIZATION = 0.9
# What servers sharing cards ask for in all; each takes an equal part.
SHARED_UTILIZATION = 0.9

How = Literal["one card each", "shared", "one at a time"]


@dataclass(frozen=True)
class Card:
    """One GPU as NVML names it."""

    name: str
    memory_bytes: int


@dataclass(frozen=True)
class ServerPlace:
    """Where one server runs: the cards it sees (CUDA_VISIBLE_DEVICES) and its share of each."""

    mode: str
    devices: tuple[int, ...]
    memory_share: float

    def vllm_args(self) -> tuple[str, ...]:
        """The vLLM arguments that put it there (the devices go in its environment)."""
        return ("--gpu-memory-utilization", f"{self.memory_share:g}")

    def environment(self) -> dict[str, str]:
        """The environment that shows it only its cards."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, self.devices))}


@dataclass(frozen=True)
class Placement:
    """Every server of a job placed, how, and why, in one line."""

    how: How
    servers: tuple[ServerPlace, ...]
    why: str

    @property
    def one_at_a_time(self) -> bool:
        """Whether the servers must be up one after the other, restarted between systems."""
        return self.how == "one at a time"


def per_card_need(model: ModelShape, batch_size: int, context_tokens: int, tensor_parallel: int,
                  allowance: MemoryAllowance) -> float:
    """Bytes one server needs on each of its cards: its share of the weights and of the batch's KV cache,
    and vLLM's allowances (which every card of a tensor-parallel group pays)."""
    weights = model.num_parameters * model.dtype_bytes / tensor_parallel
    kv = batch_size * context_tokens * kv_bytes_per_token(model) / tensor_parallel
    return weights + kv + allowance.activation_peak_bytes + allowance.non_torch_bytes


def place_servers(
    cards: Sequence[Card],
    model: ModelShape,
    modes: Sequence[str],
    batch_size: int,
    context_tokens: int,
    tensor_parallel: int = 1,
    data_parallel: int = 1,
    allowance: MemoryAllowance | None = None,
    force: How | None = None,
) -> Placement:
    """Place one server per mode on `cards` (see the module docstring); UsageError where none fits.

    `force`: "shared" or "one at a time" whatever fits, the reason saying what would have been chosen.
    """
    allowance = allowance or MemoryAllowance()
    if not cards:
        raise UsageError("placement: no GPU found (NVML lists none): a GPU job needs at least one")
    if data_parallel > 1 and "static" in modes:
        raise UsageError(f"data parallel {data_parallel}: each rank runs its own scheduler, so static mode's batch"
                         " would be per rank, not B: use tensor parallel, or run static at data parallel 1")
    group = tensor_parallel * data_parallel
    if group > len(cards):
        raise UsageError(f"tensor parallel {tensor_parallel} x data parallel {data_parallel} needs {group} GPUs;"
                         f" this host has {len(cards)}")
    smallest = min(card.memory_bytes for card in cards)
    need = per_card_need(model, batch_size, context_tokens, tensor_parallel, allowance)
    sizes = (f"{model.name} at B = {batch_size} x {context_tokens:,} tokens needs {need / 1e9:.1f} GB per card"
             f" (tensor parallel {tensor_parallel})")
    if force is not None and need <= smallest * DEFAULT_UTILIZATION:
        chosen = place_servers(cards, model, modes, batch_size, context_tokens, tensor_parallel, data_parallel,
                               allowance)
        if chosen.how != force:
            share = DEFAULT_UTILIZATION if force == "one at a time" else _shared_share(len(modes))
            places = tuple(ServerPlace(mode, tuple(range(group)), share) for mode in modes)
            return Placement(force, places, f"forced (--placement); this host would be {chosen.how}: {chosen.why}")
    if len(cards) >= group * len(modes):
        places = tuple(ServerPlace(mode, tuple(range(i * group, (i + 1) * group)), DEFAULT_UTILIZATION)
                       for i, mode in enumerate(modes))
        return Placement("one card each", places, f"{len(cards)} GPUs: each server on its own {_cards(group)}")
    share = _shared_share(len(modes))
    if need <= smallest * share:
        places = tuple(ServerPlace(mode, tuple(range(group)), share) for mode in modes)
        return Placement("shared", places, f"{sizes}: {len(modes)} fit on the same {_cards(group)} at {share:g}"
                         f" of {smallest / 1e9:.0f} GB each")
    if need <= smallest * DEFAULT_UTILIZATION:
        places = tuple(ServerPlace(mode, tuple(range(group)), DEFAULT_UTILIZATION) for mode in modes)
        return Placement("one at a time", places, f"{sizes}: one fits at {DEFAULT_UTILIZATION:g} of"
                         f" {smallest / 1e9:.0f} GB, {len(modes)} at {share:g} each do not: one server at a time,"
                         " restarted between systems")
    raise UsageError(f"placement: {sizes}, more than {DEFAULT_UTILIZATION:g} of {smallest / 1e9:.0f} GB: give a"
                     " larger tensor parallel, a smaller B or shorter requests")


def turn_order(servers: Sequence[Hashable], up: Hashable | None) -> list[int]:
    """One repetition's runs, as the indices of `servers` (each run's server, in the order given), reordered for
    servers up one at a time: grouped by server, each group in the order given, the server already `up` first.

    Every run stays in its repetition, so runs still pair by repetition; a repetition then ends on the server the
    next one starts on, and a job of R repetitions on two servers starts them R + 1 times, not at every system.
    """
    groups: dict[Hashable, list[int]] = {}
    for index, server in enumerate(servers):
        groups.setdefault(server, []).append(index)
    first = groups.pop(up, [])
    return [*first, *(index for indices in groups.values() for index in indices)]


def server_starts(servers: Sequence[Hashable], repetitions: int, up: Hashable | None = None) -> int:
    """How many times `repetitions` repetitions of runs on `servers` start a server, one at a time, `up` up first."""
    starts = 0
    for _ in range(repetitions):
        for index in turn_order(servers, up):
            if servers[index] is not None and servers[index] != up:
                starts, up = starts + 1, servers[index]
    return starts


def _shared_share(servers: int) -> float:
    return math.floor(SHARED_UTILIZATION / servers * 100) / 100


def _cards(count: int) -> str:
    return "card" if count == 1 else f"{count} cards"
