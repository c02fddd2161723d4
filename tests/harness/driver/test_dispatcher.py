"""The dispatcher's orders: open-loop schedule, closed loop, and naive wave barriers.

The users and the dispatcher run on simulated time (conftest.SimulatedTime): the
instants asserted are exact, not windows that a loaded machine can miss.
"""

from __future__ import annotations

import time

import gevent
import pytest

from harness.driver.dispatch import Dispatcher, WaveRule
from harness.driver.work import FORMED_WAVE, NO_TURN, NO_WAVE, WorkItem


def item(i: int, wave: int = NO_WAVE, arrival: float | None = None) -> WorkItem:
    return WorkItem(i, "p", 8, 10, 10, wave, arrival)


def dispatcher_on(clock, items: list[WorkItem], duration_s: float | None = None) -> Dispatcher:
    return Dispatcher(items, duration_s, clock=clock, sleep=clock.sleep)


def drive(dispatcher: Dispatcher, clock, users: int, service_s) -> list[tuple[str, int, float]]:
    """Simulated users: take an item, wait for its schedule, 'serve' it, repeat."""
    log: list[tuple[str, int, float]] = []

    def user() -> None:
        while (work := dispatcher.next_item()) is not None:
            dispatcher.wait_for_schedule(work)
            log.append(("start", work.request_id, clock()))
            clock.sleep(service_s(work))
            log.append(("end", work.request_id, clock()))
            dispatcher.done(work)

    greenlets = [gevent.spawn(user) for _ in range(users)]
    dispatcher.open()
    assert clock.run_until(dispatcher.finished)
    gevent.joinall(greenlets, timeout=5)
    return log


def test_naive_waves_start_only_after_the_previous_wave_finished(simulated_time):
    items = [item(i, wave=i // 2) for i in range(6)]
    # Request 0 is slow: its wave-mate and the whole next wave must wait for it.
    log = drive(
        dispatcher_on(simulated_time, items),
        simulated_time,
        users=2,
        service_s=lambda w: 0.2 if w.request_id == 0 else 0.01,
    )
    end = {rid: t for kind, rid, t in log if kind == "end"}
    start = {rid: t for kind, rid, t in log if kind == "start"}
    assert min(start[2], start[3]) >= end[0]
    assert min(start[4], start[5]) >= max(end[2], end[3])


def waves_of(log: list[tuple[str, int, float]], start_s: float) -> list[tuple[float, list[int]]]:
    """Each wave's send instant (from the run start) and its members, from the users' log."""
    sends: dict[float, list[int]] = {}
    for kind, rid, t in log:
        if kind == "start":
            sends.setdefault(round(t - start_s, 6), []).append(rid)
    return sorted((at, sorted(members)) for at, members in sends.items())


def test_client_static_forms_each_wave_by_the_engines_rule(simulated_time):
    # B = 3, batch wait 0.5 s. Arrivals: three at once (a full wave), then two that wait out the batch
    # wait, then one alone after a long gap, then three close together while a wave is running.
    arrivals = [0.0, 0.0, 0.0, 1.0, 1.1, 5.0, 5.05, 5.1, 5.2]
    items = [item(i, wave=FORMED_WAVE, arrival=at) for i, at in enumerate(arrivals)]
    dispatcher = Dispatcher(items, rule=WaveRule(batch_size=3, batch_wait_s=0.5), clock=simulated_time,
                            sleep=simulated_time.sleep)
    log = drive(dispatcher, simulated_time, users=3, service_s=lambda w: 0.3)
    assert dispatcher.start_s is not None
    assert waves_of(log, dispatcher.start_s) == [
        (0.0, [0, 1, 2]),  # B arrived at once: it goes at once
        (1.5, [3, 4]),  # the oldest waited its 0.5 s: the two that came
        (5.1, [5, 6, 7]),  # the third of B came at 5.1, before 5.0 + 0.5
        (5.7, [8]),  # 8 came at 5.2, while 5-7 ran until 5.4: it goes alone once its 0.5 s are up
    ]
    # Every item's wave is one formed in order; no wave began before the previous had ended.
    ends = {rid: t for kind, rid, t in log if kind == "end"}
    starts = {rid: t for kind, rid, t in log if kind == "start"}
    assert starts[3] >= max(ends[0], ends[1], ends[2]) and starts[8] >= max(ends[5], ends[6], ends[7])


def test_client_static_in_a_burst_is_waves_of_b_unpadded(simulated_time):
    items = [item(i, wave=FORMED_WAVE, arrival=0.0) for i in range(7)]
    dispatcher = Dispatcher(items, rule=WaveRule(batch_size=3, batch_wait_s=1.0), clock=simulated_time,
                            sleep=simulated_time.sleep)
    # A wave ends with its slowest member: request 0 takes 0.4 s, the others 0.1 s.
    log = drive(dispatcher, simulated_time, users=3, service_s=lambda w: 0.4 if w.request_id == 0 else 0.1)
    assert dispatcher.start_s is not None
    # The last one waits for a full wave that never comes: until 1 s after its arrival at 0, as the engine's
    # batch wait counts from the oldest waiting arrival.
    assert waves_of(log, dispatcher.start_s) == [(0.0, [0, 1, 2]), (0.4, [3, 4, 5]), (1.0, [6])]


def test_formed_waves_need_a_rule():
    with pytest.raises(ValueError, match="WaveRule"):
        Dispatcher([item(0, wave=FORMED_WAVE, arrival=0.0)])


def test_open_loop_sends_at_the_planned_offsets(simulated_time):
    items = [item(i, arrival=0.1 * i) for i in range(4)]
    dispatcher = dispatcher_on(simulated_time, items)
    log = drive(dispatcher, simulated_time, users=4, service_s=lambda w: 0.01)
    assert dispatcher.start_s is not None
    for kind, rid, t in log:
        if kind == "start":
            # Never early; late by less than the spacing.
            assert 0.1 * rid - 0.005 <= t - dispatcher.start_s < 0.1 * (rid + 1)


def test_closed_loop_keeps_at_most_users_in_flight_and_finishes_everything(simulated_time):
    in_flight, peak = 0, 0
    dispatcher = dispatcher_on(simulated_time, [item(i) for i in range(10)])
    # Stable sort: events at one instant keep the order they happened in.
    log = drive(dispatcher, simulated_time, users=3, service_s=lambda w: 0.01)
    for kind, _, _ in sorted(log, key=lambda e: e[2]):
        in_flight += 1 if kind == "start" else -1
        peak = max(peak, in_flight)
    assert peak == 3
    assert dispatcher.completed == 10


def test_duration_stops_handing_out_work(simulated_time):
    dispatcher = dispatcher_on(simulated_time, [item(i) for i in range(1000)], duration_s=0.2)
    drive(dispatcher, simulated_time, users=2, service_s=lambda w: 0.02)
    assert 10 <= dispatcher.completed <= 30
    # The unreached tail of the closed loop's pool is named, not silently dropped.
    assert sorted(dispatcher.handed_out) == list(range(dispatcher.completed))
    assert dispatcher.not_due == list(range(dispatcher.completed, 1000))


def test_a_late_scheduled_request_is_sent_after_the_duration_not_dropped(simulated_time):
    # Due at 0.1 s each, but one user serving 0.2 s per request falls behind past the duration.
    dispatcher = dispatcher_on(simulated_time, [item(i, arrival=0.1 * i) for i in range(3)], duration_s=0.25)
    drive(dispatcher, simulated_time, users=1, service_s=lambda w: 0.2)
    assert dispatcher.completed == 3 and dispatcher.not_due == []


def test_the_default_clock_is_the_wall_clock_records_share():
    # Send times in the records are time.time(); the schedule must be on the same clock.
    dispatcher = Dispatcher([item(0)])
    before = time.time()
    assert before <= dispatcher.open() <= time.time()


def turn(i: int, arrival: float, after: int = NO_TURN, think_s: float = 0.0) -> WorkItem:
    return WorkItem(i, "p", 8, 10, 10, NO_WAVE, arrival, session="s", turn=1, after=after, think_s=think_s)


# Two chats: 0 -> 2 -> 4 and 1 -> 3. Later turns' trace arrivals come before their predecessors could end.
CHATS = [turn(0, 0.0), turn(1, 0.05), turn(2, 0.1, after=0, think_s=0.3), turn(3, 0.15, after=1, think_s=0.1),
         turn(4, 0.2, after=2, think_s=0.2)]
SERVICE_S = {0: 0.5, 1: 0.25, 2: 0.125, 3: 0.0625, 4: 0.03125}


@pytest.mark.parametrize("users", [1, 2, 5])
def test_no_turn_goes_out_before_its_previous_turn_ended_plus_its_think_time(simulated_time, users):
    dispatcher = dispatcher_on(simulated_time, CHATS)
    scheduled: dict[int, float | None] = {}

    def service_s(work: WorkItem) -> float:
        scheduled[work.request_id] = dispatcher.scheduled_s(work)
        return SERVICE_S[work.request_id]

    log = drive(dispatcher, simulated_time, users, service_s)
    start = {rid: t for kind, rid, t in log if kind == "start"}
    end = {rid: t for kind, rid, t in log if kind == "end"}
    assert dispatcher.completed == len(CHATS)
    for work in CHATS:
        if work.after == NO_TURN:
            assert scheduled[work.request_id] == dispatcher.start_s + work.arrival_s
        else:
            # Due exactly at the previous answer's end plus the think time, and sent no earlier.
            assert scheduled[work.request_id] == end[work.after] + work.think_s
            assert start[work.request_id] >= end[work.after] + work.think_s
    if users == 5:  # a user for each: every turn goes out the moment it is due
        assert start[4] == pytest.approx(dispatcher.start_s + 0.5 + 0.3 + 0.125 + 0.2)
