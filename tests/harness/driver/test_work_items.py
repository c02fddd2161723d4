"""Work items from a plan: exact lengths, naive padding to the wave maximum, user counts."""

from __future__ import annotations

import pytest

from harness.driver.work import (
    FORMED_WAVE,
    NO_WAVE,
    WARM_UP_TOKENS,
    build_work,
    check_fits,
    longest_requests,
    user_count,
    warm_up_choice,
)
from harness.errors import UsageError
from harness.workload.plan import PlannedRequest, RequestPlan


def plan_of(outputs, arrival="burst", users=None, prompts=None, trace=False):
    requests = tuple(
        PlannedRequest(index=i, prompt_tokens=8 if prompts is None else prompts[i], output_tokens=n,
                       arrival_s=None if arrival == "closed" else 0.5 * i, trace_row=i + 2 if trace else None)
        for i, n in enumerate(outputs)
    )
    return RequestPlan(
        spec_name="t", seed=1, endpoint="completions", arrival=arrival, users=users, duration_s=None, requests=requests
    )


def test_continuous_and_static_ask_for_exactly_the_plan():
    plan = plan_of([100, 200, 300, 1000])
    for system in ("continuous", "static"):
        items = build_work(plan, ["p"] * 4, system, batch_size=2)
        assert [i.requested_output_tokens for i in items] == [100, 200, 300, 1000]
        assert [i.wave for i in items] == [NO_WAVE] * 4
        assert [i.arrival_s for i in items] == [0.0, 0.5, 1.0, 1.5]


def test_client_static_asks_for_each_plan_length_and_forms_its_waves_as_it_sends():
    plan = plan_of([100, 200, 300, 1000])
    items = build_work(plan, ["p"] * 4, "client-static", batch_size=2)
    assert [i.requested_output_tokens for i in items] == [100, 200, 300, 1000]  # unpadded
    assert [i.wave for i in items] == [FORMED_WAVE] * 4
    assert [i.arrival_s for i in items] == [0.0, 0.5, 1.0, 1.5]
    assert user_count(plan, "client-static", batch_size=2, max_users=100) == 2


def test_naive_pads_every_row_to_its_wave_maximum():
    plan = plan_of([100, 200, 300, 1000, 50])
    items = build_work(plan, ["p"] * 5, "naive", batch_size=2)
    assert [i.wave for i in items] == [0, 0, 1, 1, 2]
    assert [i.requested_output_tokens for i in items] == [200, 200, 1000, 1000, 50]
    # Useful output stays the plan's.
    assert [i.planned_output_tokens for i in items] == [100, 200, 300, 1000, 50]
    assert all(i.arrival_s is None for i in items)


def test_user_counts():
    burst = plan_of([10] * 40)
    assert user_count(burst, "continuous", 16, max_users=1024) == 40
    assert user_count(burst, "continuous", 16, max_users=8) == 8
    assert user_count(burst, "naive", 16, max_users=1024) == 16
    closed = plan_of([10] * 40, arrival="closed", users=5)
    assert user_count(closed, "static", 16, max_users=1024) == 5


def test_a_plan_longer_than_the_servers_context_is_refused_before_sending():
    plan = plan_of([100, 200, 300, 1000])
    assert longest_requests(plan, "continuous", 2) == [108, 208, 308, 1008]
    assert longest_requests(plan, "naive", 2) == [208, 208, 1008, 1008]
    check_fits(plan, "continuous", 2, max_model_len=1008)
    check_fits(plan, "static", 2, max_model_len=None)
    with pytest.raises(UsageError) as refused:
        check_fits(plan, "continuous", 2, max_model_len=1000)
    assert str(refused.value) == ("1 of 4 requests exceed the server's max_model_len 1000"
                                  " (first: request 3, 8 + 1000 tokens)")
    # Naive asks for its wave's longest: both of the last wave exceed.
    with pytest.raises(UsageError, match=r"^2 of 4 requests .* \(first: request 2, 8 \+ 1000 tokens\)$"):
        check_fits(plan, "naive", 2, max_model_len=1000)


def test_a_trace_row_longer_than_the_context_is_named_by_its_row():
    plan = plan_of([10, 20, 30], prompts=[8, 4080, 4090], trace=True)
    with pytest.raises(UsageError) as refused:
        check_fits(plan, "static", 4, max_model_len=4096)
    assert str(refused.value) == (
        "2 of 3 requests exceed the server's max_model_len 4096 (first: trace row 4, 4080 + 20 tokens): give the"
        " trace's max_tokens as at most that, with over_limit: clip to clip them")


def test_warm_up_sends_a_prompt_with_room_in_the_context():
    # The first prompt fits with its warm-up tokens: it is the one, as before.
    assert warm_up_choice(plan_of([1, 1], prompts=[100, 50]), max_model_len=4096) == (0, WARM_UP_TOKENS)
    assert warm_up_choice(plan_of([1, 1], prompts=[4095, 50]), max_model_len=None) == (0, WARM_UP_TOKENS)
    # A trace clipped to the context: its first rows fill it, a later one has room.
    assert warm_up_choice(plan_of([1, 1, 5], prompts=[4095, 4095, 300]), max_model_len=4096) == (2, WARM_UP_TOKENS)
    # Every prompt at the limit: the shortest, with the room it has.
    assert warm_up_choice(plan_of([1, 3, 1], prompts=[4095, 4093, 4095]), max_model_len=4096) == (1, 3)
