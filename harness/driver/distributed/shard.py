"""Which worker process sends which planned request (pure, no I/O).

Open loop (burst, poisson): every request has its own planned offset from the run's
start, so the plan splits cleanly. Request j of the send order goes to worker j mod N,
and each worker sends its share at the planned offsets from one common start instant
(harness.driver.distributed). Round robin keeps every worker's share spread evenly
over the run, so no worker takes all of a busy stretch. A conversation's later turns go
to the worker of its first turn: a turn waits for the previous one's answer, which only
that worker sees end; its first turns are dealt round robin.

Closed loop and naive waves: what goes out next depends on what has finished, across
all workers. A closed loop owes only the requests its duration reached, and those must
stay the plan's first ones (harness.rundir.accounting); a naive wave must finish whole before
the next one starts. So these plans are not split: the master keeps the one queue, in
plan order, and hands each item to whichever worker's user asks next. Sharding a closed
loop means splitting its users (its concurrency) across the workers: Locust's master
spreads them evenly, as it spreads every run's users.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.driver.work import NO_TURN, NO_WAVE, WorkItem
from harness.errors import UsageError


@dataclass(frozen=True)
class ClusterSpec:
    """How many worker processes a run has, and where its master listens (harness.driver.distributed.cluster)."""

    workers: int
    # Listen here and wait for `workers` to attach (`batchbench worker --master`); None:
    # the run starts its workers itself, on loopback.
    bind: tuple[str, int] | None = None


def cluster_spec(workers: int, bind: tuple[str, int] | None = None) -> ClusterSpec | None:
    """The cluster `--workers` and `--master-bind` ask for; None for one worker and no master
    address: then the run is today's single process, unchanged."""
    if workers == 1 and bind is None:
        return None
    return ClusterSpec(workers, bind)


@dataclass(frozen=True)
class Shard:
    """What one worker (by index, 0-based) is given before the run starts."""

    worker: int
    # Its own requests (open loop); empty when the master hands items out (`central`).
    items: tuple[WorkItem, ...]
    central: bool


def is_central(items: Sequence[WorkItem]) -> bool:
    """True when items must be handed out one by one by the master: closed loop or naive waves."""
    return any(item.arrival_s is None or item.wave != NO_WAVE for item in items)


def shard_work(items: Sequence[WorkItem], workers: int) -> list[Shard]:
    """Split a run's work items across `workers` processes, deterministically.

    Every item lands in exactly one open-loop shard, each keeping its planned arrival
    offset; central plans give every worker an empty shard (the master hands items out).
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if is_central(items):
        return [Shard(worker, (), True) for worker in range(workers)]
    owners = _owners(items, workers)
    return [Shard(worker, tuple(item for item, owner in zip(items, owners, strict=True) if owner == worker), False)
            for worker in range(workers)]


def _owners(items: Sequence[WorkItem], workers: int) -> list[int]:
    """Each item's worker: round robin over the items that wait for no other, a later turn its first turn's."""
    by_id: dict[int, int] = {}
    dealt = 0
    for item in items:
        if item.after == NO_TURN:
            by_id[item.request_id] = dealt % workers
            dealt += 1
        else:
            by_id[item.request_id] = by_id[item.after]
    return [by_id[item.request_id] for item in items]


def check_workers(workers: int, users: int) -> None:
    """Refuse more worker processes than the plan has concurrent users: some would idle."""
    if workers > users:
        raise UsageError(
            f"--workers {workers} is more than the {users} concurrent users this plan runs: use at most {users}"
        )
