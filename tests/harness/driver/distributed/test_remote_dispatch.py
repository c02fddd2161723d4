"""Closed loops and naive waves across workers: one queue at the master, asked item by item.

The workers' RemoteDispatchers and the master's ItemDesk talk through direct calls in
greenlets (the real run carries the same calls over Locust's messages), on simulated time.
"""

from __future__ import annotations

import gevent

from harness.driver.dispatch import Dispatcher
from harness.driver.distributed.remote import ItemDesk, RemoteDispatcher
from harness.driver.distributed.wire import FINISHED, NEXT
from harness.driver.work import NO_WAVE, WorkItem


def item(i: int, wave: int = NO_WAVE) -> WorkItem:
    return WorkItem(i, "p", 8, 10, 10, wave, None)


def cluster(clock, items, duration_s=None, workers=2):
    """A master desk and `workers` remote dispatchers wired to it."""
    remotes: dict[str, RemoteDispatcher] = {}
    desk = ItemDesk(Dispatcher(items, duration_s, clock=clock, sleep=clock.sleep),
                    lambda worker, ticket, work: remotes[worker].answer(ticket, work))

    def sender(worker):
        def send(kind, data):
            if kind == NEXT:
                gevent.spawn(desk.ask, worker, data["ticket"])
            elif kind == FINISHED:
                desk.finished(worker, data["request_id"])
        return send

    for k in range(workers):
        remotes[f"w{k}"] = RemoteDispatcher(sender(f"w{k}"))
    return desk, remotes


def drive(clock, desk, remotes, users_per_worker, service_s):
    log = []

    def user(worker, remote):
        while (work := remote.next_item()) is not None:
            log.append(("start", worker, work.request_id, clock()))
            clock.sleep(service_s(work))
            log.append(("end", worker, work.request_id, clock()))
            remote.done(work)

    greenlets = [gevent.spawn(user, name, remote) for name, remote in remotes.items() for _ in range(users_per_worker)]
    desk.dispatcher.open()
    for remote in remotes.values():
        remote.open(desk.dispatcher.start_s)
    assert clock.run_until(desk.dispatcher.finished)
    for remote in remotes.values():
        assert clock.run_until(remote.finished)
    gevent.joinall(greenlets, timeout=5)
    return log


def test_naive_waves_hold_their_barrier_across_workers(simulated_time):
    items = [item(i, wave=i // 4) for i in range(12)]
    desk, remotes = cluster(simulated_time, items)
    # Request 0 is slow: every member of wave 1 must wait for it, whichever worker holds it.
    log = drive(simulated_time, desk, remotes, 2, lambda w: 0.5 if w.request_id == 0 else 0.01)
    start = {rid: t for kind, _, rid, t in log if kind == "start"}
    end = {rid: t for kind, _, rid, t in log if kind == "end"}
    assert sorted(start) == list(range(12))
    for wave in (1, 2):
        members, previous = range(4 * wave, 4 * wave + 4), range(4 * wave - 4, 4 * wave)
        assert min(start[i] for i in members) >= max(end[i] for i in previous)
    # Both workers sent members of every wave: the users, not the waves, were split.
    for wave in range(3):
        assert {w for kind, w, rid, _ in log if kind == "start" and rid // 4 == wave} == {"w0", "w1"}


def test_a_closed_loop_owes_only_the_plans_first_requests_across_workers(simulated_time):
    items = [item(i) for i in range(100)]
    desk, remotes = cluster(simulated_time, items, duration_s=1.0)
    log = drive(simulated_time, desk, remotes, 2, lambda w: 0.1)
    started = sorted(rid for kind, _, rid, _ in log if kind == "start")
    # 4 users, 0.1 s each, for 1 s: 40 requests, the plan's first 40; the rest not due.
    assert started == list(range(40))
    assert desk.dispatcher.not_due == list(range(40, 100))
    assert sorted(remotes["w0"].handed_out | remotes["w1"].handed_out) == started


def test_a_dead_workers_items_are_released_so_the_run_can_end(simulated_time):
    items = [item(i, wave=i // 2) for i in range(4)]
    desk, remotes = cluster(simulated_time, items)
    desk.dispatcher.open()
    remotes["w0"].open(0.0)
    taken = [remotes["w0"].next_item() for _ in range(2)]
    gevent.idle()
    assert desk.release("w0") == sorted(work.request_id for work in taken)
    # The wave is over for the master: the next one can go to the other worker.
    remotes["w1"].open(0.0)
    assert {remotes["w1"].next_item().request_id for _ in range(2)} == {2, 3}
