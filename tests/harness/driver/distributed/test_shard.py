"""Sharding a plan across worker processes: every request exactly once, its offset kept."""

from __future__ import annotations

import gevent
import pytest
from gevent.event import Event

from harness.driver.dispatch import Dispatcher
from harness.driver.distributed.shard import check_workers, cluster_spec, is_central, shard_work
from harness.driver.work import NO_TURN, NO_WAVE, WorkItem, build_work
from harness.errors import UsageError
from harness.workload import WorkloadSpec, build_plan

SPEC = {
    "name": "poisson",
    "seed": 11,
    "num_requests": 101,
    "prompt_tokens": {"kind": "fixed", "value": 8},
    "output_tokens": {"kind": "choice", "values": [4, 9, 30], "order": "cycle"},
    "arrival": {"kind": "poisson", "rate": 40},
}


def items_for(system: str = "continuous", **overrides):
    plan = build_plan(WorkloadSpec.model_validate({**SPEC, **overrides}))
    return build_work(plan, ["p"] * len(plan.requests), system, 4)


@pytest.mark.parametrize("workers", [1, 2, 3, 7, 101])
def test_every_open_loop_request_goes_to_exactly_one_worker_with_its_offset(workers):
    items = items_for()
    shards = shard_work(items, workers)
    assert [shard.worker for shard in shards] == list(range(workers))
    sent = [item for shard in shards for item in shard.items]
    assert sorted(item.request_id for item in sent) == list(range(101))
    assert sorted(sent, key=lambda item: item.request_id) == items  # nothing changed on the way, offsets included
    sizes = [len(shard.items) for shard in shards]
    assert max(sizes) - min(sizes) <= 1 and not any(shard.central for shard in shards)


def test_each_share_is_spread_over_the_whole_run_not_one_stretch_of_it():
    items = items_for()
    last = items[-1].arrival_s
    for shard in shard_work(items, 3):
        assert shard.items[0].arrival_s < 0.1 * last and shard.items[-1].arrival_s > 0.9 * last


def test_sharding_is_a_pure_function_of_plan_and_worker_count():
    assert shard_work(items_for(), 3) == shard_work(items_for(), 3)


def test_offsets_hold_across_workers_from_one_common_start(simulated_time):
    """Each worker's dispatcher opens at the same t0: every request is due at t0 + its planned offset."""
    items = items_for()
    t0 = simulated_time() + 0.5
    sent: dict[int, float] = {}

    def worker(shard_items):
        dispatcher = Dispatcher(shard_items, clock=simulated_time, sleep=simulated_time.sleep)
        dispatcher.open(at=t0)
        while (item := dispatcher.next_item()) is not None:
            dispatcher.wait_for_schedule(item)
            sent[item.request_id] = simulated_time()
            dispatcher.done(item)
        return dispatcher

    greenlets = [gevent.spawn(worker, shard.items) for shard in shard_work(items, 3)]
    finished = Event()
    gevent.spawn(lambda: (gevent.joinall(greenlets), finished.set()))
    assert simulated_time.run_until(finished)
    assert sent == {item.request_id: t0 + item.arrival_s for item in items}


@pytest.mark.parametrize(("system", "overrides"), [
    ("naive", {}),
    ("continuous", {"arrival": {"kind": "closed", "users": 4}}),
])
def test_closed_loops_and_naive_waves_are_handed_out_centrally(system, overrides):
    items = items_for(system, **overrides)
    assert is_central(items)
    shards = shard_work(items, 2)
    assert all(shard.central and shard.items == () for shard in shards)


def test_an_open_loop_is_not_central():
    assert not is_central(items_for())


def test_one_worker_and_no_master_address_is_the_single_process_path():
    assert cluster_spec(1) is None
    assert cluster_spec(2).workers == 2 and cluster_spec(2).bind is None
    assert cluster_spec(1, ("0.0.0.0", 5557)).bind == ("0.0.0.0", 5557)


def test_more_workers_than_users_is_refused():
    check_workers(4, 4)
    with pytest.raises(UsageError, match="--workers 5 is more than the 4 concurrent users"):
        check_workers(5, 4)


def test_zero_workers_is_not_a_sharding():
    with pytest.raises(ValueError):
        shard_work(items_for(), 0)


def test_a_conversations_later_turns_go_to_the_worker_of_its_first_turn():
    # Chats start at 0, 1, 3 and 4; 2 follows 0, 5 follows 2, 6 follows 3.
    after = {2: 0, 5: 2, 6: 3}
    items = [WorkItem(i, "p", 8, 4, 4, NO_WAVE, 0.1 * i, after=after.get(i, NO_TURN), think_s=0.5 if i in after else 0)
             for i in range(7)]
    shards = shard_work(items, 2)
    owner = {item.request_id: shard.worker for shard in shards for item in shard.items}
    assert sorted(owner) == list(range(7))
    # First turns dealt round robin; each later turn beside the turn it waits for.
    assert [owner[i] for i in (0, 1, 3, 4)] == [0, 1, 0, 1]
    assert all(owner[i] == owner[before] for i, before in after.items())
    assert not any(shard.central for shard in shards)
