"""Shared prefix blocks: parsing a request's hash ids and the plan's own reuse."""

from __future__ import annotations

import pytest

from harness.errors import UsageError
from harness.workload import BurstArrival, FixedLength, WorkloadSpec, build_plan
from harness.workload.prefixes import (
    PrefixIdsError,
    conversation_reuse,
    planned_reuse,
    prefix_blocks,
    shared_prefix_ids,
)


def test_hash_ids_parse_as_strings_whatever_their_json_type():
    assert prefix_blocks("[1, 2, 3]") == ["1", "2", "3"]
    assert prefix_blocks('["a", 7]') == ["a", "7"]
    assert prefix_blocks("") == [] and prefix_blocks(None) == []
    for bad in ("1, 2", '{"a": 1}', "[true]", "[[1]]"):
        with pytest.raises(PrefixIdsError, match="hash_ids"):
            prefix_blocks(bad)


def test_reuse_counts_the_leading_blocks_an_earlier_request_carried():
    # Blocks of 10 tokens. Request 2 reuses blocks 1 and 2 (20 tokens) but not 4, nor the 9 after it;
    # request 3 reuses only block 1: block 5 is new, so block 2 after it cannot be a cached prefix.
    requests = [(30, "[1, 2, 3]"), (25, "[1, 2, 4]"), (25, "[1, 5, 2]"), (8, "[1]")]
    reuse = planned_reuse(requests, block_tokens=10)
    assert reuse.reused_tokens == 0 + 20 + 10 + 8  # the last: all of a prompt shorter than its block
    assert reuse.prompt_tokens == 88
    assert reuse.share == pytest.approx(38 / 88)


def test_groups_go_round_the_requests():
    assert [shared_prefix_ids(i, 3) for i in range(4)] == [
        '["shared-0"]', '["shared-1"]', '["shared-2"]', '["shared-0"]']
    spec = WorkloadSpec(name="sys", seed=0, num_requests=8, prompt_tokens=FixedLength(value=100),
                        output_tokens=FixedLength(value=5), arrival=BurstArrival(),
                        shared_prefix={"tokens": 60, "groups": 2})
    plan = build_plan(spec)
    assert plan.prefix_block_tokens == 60
    reuse = planned_reuse(((r.prompt_tokens, r.hash_ids) for r in plan.requests), 60)
    assert reuse.reused_tokens == 6 * 60  # all but each group's first request


def test_a_prefix_no_prompt_can_hold_is_refused_naming_a_request():
    spec = WorkloadSpec(name="sys", seed=0, num_requests=4, prompt_tokens=FixedLength(value=61),
                        output_tokens=FixedLength(value=5), arrival=BurstArrival(), shared_prefix={"tokens": 60})
    with pytest.raises(UsageError, match=r"sys: shared_prefix.tokens 60 leaves no room in 4 of 4 prompts \(first: "
                       r"request 0, 61 tokens"):
        build_plan(spec)


def test_a_plan_without_prefixes_reads_as_before():
    spec = WorkloadSpec(name="plain", seed=0, num_requests=2, prompt_tokens=FixedLength(value=10),
                        output_tokens=FixedLength(value=5), arrival=BurstArrival())
    plan = build_plan(spec)
    assert b"prefix_block_tokens" not in plan.to_json() and b"hash_ids" not in plan.to_json()


def test_a_later_turn_reuses_its_previous_turns_prompt():
    # Turn 2 (after 0) opens with request 0's 100 tokens; turn 3 (after 2) with request 2's 250.
    reuse = conversation_reuse([(100, None), (80, None), (250, 0), (400, 2)])
    assert (reuse.reused_tokens, reuse.prompt_tokens) == (350, 830)
