"""Conversations: a trace's sessions as chats, each turn after the previous answer and carrying it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.driver.work import build_work, check_fits
from harness.errors import UsageError
from harness.workload import build_plan, load_spec, make_prompts
from harness.workload.synthetic_trace import SyntheticTrace, generate, write_trace

COLUMNS = {"arrival": "t", "prompt_tokens": "p", "output_tokens": "o", "session": "chat"}
# Two chats interleaved: a's turns are rows 1, 3 and 5 (1-based), b's rows 2 and 4.
ROWS = """\
t,p,o,chat,turn,think
0,10,5,a,1,0
1,20,6,b,1,0
2,7,4,a,2,1.5
3,8,3,b,2,4
4,9,2,a,3,0.5
"""


def write(tmp_path: Path, rows: str = ROWS, **trace) -> Path:
    (tmp_path / "chats.csv").write_text(rows)
    spec = {"name": "chats", "seed": 5, "trace": {"path": "chats.csv", "columns": COLUMNS,
                                                  "conversation": {}, **trace}}
    path = tmp_path / "chats.yaml"
    path.write_text(json.dumps(spec))
    return path


def plan_of(tmp_path: Path, rows: str = ROWS, **trace):
    return build_plan(load_spec(write(tmp_path, rows, **trace)))


def refused(tmp_path: Path, rows: str = ROWS, **trace) -> str:
    with pytest.raises(UsageError) as raised:
        plan_of(tmp_path, rows, **trace)
    return str(raised.value)


WITH_TURNS = {"columns": {**COLUMNS, "turn": "turn", "think_s": "think"}}


def test_each_turn_waits_for_the_previous_one_of_its_session_and_carries_it(tmp_path):
    plan = plan_of(tmp_path, **WITH_TURNS, time_scale=2)
    requests = plan.requests
    assert [(r.session, r.turn, r.after) for r in requests] == [
        ("a", 1, None), ("b", 1, None), ("a", 2, 0), ("b", 2, 1), ("a", 3, 2)]
    # The prompt sent is the chat so far: earlier prompts and answers, then the turn's own text.
    assert [r.prompt_tokens for r in requests] == [10, 20, 10 + 5 + 7, 20 + 6 + 8, 22 + 4 + 9]
    assert [r.output_tokens for r in requests] == [5, 6, 4, 3, 2]
    # Think times are on the trace's clock, replayed as fast as its arrivals; a first turn has none.
    assert [r.think_s for r in requests] == [None, None, 0.75, 2.0, 0.25]
    assert [r.arrival_s for r in requests] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert plan.conversation


def test_without_turn_or_think_columns_turns_count_in_row_order_and_think_the_default(tmp_path):
    plan = plan_of(tmp_path, conversation={"think_s": 3})
    assert [(r.turn, r.after, r.think_s) for r in plan.requests] == [
        (1, None, None), (1, None, None), (2, 0, 3.0), (2, 1, 3.0), (3, 2, 3.0)]


def test_a_row_without_a_session_is_a_chat_of_its_own(tmp_path):
    plan = plan_of(tmp_path, ROWS.replace(",b,", ",,"), **WITH_TURNS)
    assert [r.after for r in plan.requests] == [None, None, 0, None, 2]


def test_the_plan_round_trips_and_a_plain_trace_plan_has_no_conversation_fields(tmp_path):
    plan = plan_of(tmp_path, **WITH_TURNS)
    assert type(plan).from_json(plan.to_json()) == plan
    (tmp_path / "plain.csv").write_text(ROWS)
    (tmp_path / "plain.yaml").write_text(json.dumps({"name": "p", "seed": 0, "trace": {"path": "plain.csv",
                                                                          "columns": COLUMNS}}))
    plain = build_plan(load_spec(tmp_path / "plain.yaml"))
    assert not plain.conversation
    assert b'"turn"' not in plain.to_json() and b'"after"' not in plain.to_json()


@pytest.mark.parametrize(("turns", "wrong"), [
    ("1,1,2,2,2", "row 5: turn 2 of session 'a' repeats (row 3)"),
    ("1,1,3,2,4", "row 3: turn 3 of session 'a' follows turn 1 (row 1)"),
    ("1,1,2,2,1", "row 5: turn 1 of session 'a' follows turn 2 (row 3)"),
])
def test_a_turn_that_repeats_or_skips_is_refused_naming_the_row(tmp_path, turns, wrong):
    numbers = turns.split(",")
    lines = ROWS.splitlines()
    rows = "\n".join([lines[0]] + [",".join([*line.split(",")[:4], n, line.split(",")[5]])
                                   for line, n in zip(lines[1:], numbers, strict=True)]) + "\n"
    message = refused(tmp_path, rows, **WITH_TURNS)
    assert message.startswith(f"{tmp_path / 'chats.csv'}: {wrong}")
    assert "\n" not in message


def test_a_negative_think_time_is_refused_naming_the_row(tmp_path):
    message = refused(tmp_path, ROWS.replace("a,2,1.5", "a,2,-1"), **WITH_TURNS)
    assert message == f"{tmp_path / 'chats.csv'}: row 3: think must be a number of seconds of at least 0, got -1"


def test_a_fractional_turn_is_refused(tmp_path):
    message = refused(tmp_path, ROWS.replace("a,2,1.5", "a,2.5,1.5"), **WITH_TURNS)
    assert message == f"{tmp_path / 'chats.csv'}: row 3: turn must be a whole number of at least 0, got 2.5"


def test_a_grown_prompt_over_max_tokens_is_refused(tmp_path):
    # Each row alone fits in 30 tokens; b's second turn carries 20 + 6 + 8 and a's third 22 + 4 + 9.
    message = refused(tmp_path, max_tokens=30)
    assert "2 of 5 turns ask for more than max_tokens 30" in message
    assert "(first: row 4, turn 2 of session 'b', 34 + 3)" in message


@pytest.mark.parametrize(("trace", "wrong"), [
    ({"columns": {k: v for k, v in COLUMNS.items() if k != "session"}}, "conversation: needs a session column"),
    ({"over_limit": "clip", "max_tokens": 100}, "over_limit: clip does not apply to a conversation"),
])
def test_a_conversation_needs_a_session_and_refuses_clipping(tmp_path, trace, wrong):
    with pytest.raises(UsageError, match=wrong):
        plan_of(tmp_path, **trace)


def test_a_turn_column_without_a_conversation_is_refused(tmp_path):
    (tmp_path / "chats.csv").write_text(ROWS)
    (tmp_path / "t.yaml").write_text(json.dumps({"name": "t", "seed": 0, "trace": {
        "path": "chats.csv", "columns": {**COLUMNS, "turn": "turn"}}}))
    with pytest.raises(UsageError, match="columns.turn: read only for a conversation: add conversation"):
        load_spec(tmp_path / "t.yaml")


def test_a_later_turns_prompt_is_the_previous_prompt_then_exact_new_text(tmp_path, tokenizer):
    plan = plan_of(tmp_path, **WITH_TURNS)
    prompts = make_prompts(plan, tokenizer)
    for request, prompt in zip(plan.requests, prompts, strict=True):
        assert len(tokenizer.encode(prompt, add_special_tokens=True)) == request.prompt_tokens
        if request.after is not None:
            assert prompt.startswith(prompts[request.after])
    assert make_prompts(plan, tokenizer) == prompts


def test_naive_refuses_a_conversation_with_one_line(tmp_path):
    plan = plan_of(tmp_path, **WITH_TURNS)
    with pytest.raises(UsageError, match="^naive: a conversation cannot be sent in padded waves"):
        check_fits(plan, "naive", 4, None)
    with pytest.raises(UsageError, match="^client-static: a conversation cannot be sent in waves"):
        check_fits(plan, "client-static", 4, None)
    items = build_work(plan, ["x"] * len(plan.requests), "static", 4)
    assert [(item.turn, item.after, item.think_s) for item in items] == [
        (1, -1, 0.0), (1, -1, 0.0), (2, 0, 1.5), (2, 1, 4.0), (3, 2, 0.5)]


def test_generated_conversations_count_their_turns_and_arrive_after_their_think_time(tmp_path):
    settings = SyntheticTrace(rows=60, conversations=True, day_s=600, think_median_s=5, seed=4)
    columns = generate(settings)
    assert len(columns["turn"]) == 60 and (columns["arrival_s"][1:] >= columns["arrival_s"][:-1]).all()
    last: dict[str, tuple[int, float]] = {}
    for session, turn, think, arrival in zip(columns["session"], columns["turn"], columns["think_s"],
                                             columns["arrival_s"], strict=True):
        if session in last:
            assert turn == last[session][0] + 1 and think > 0
            assert arrival == pytest.approx(last[session][1] + think, abs=1e-3)
        else:
            assert turn == 1 and think == 0
        last[session] = (turn, arrival)
    assert max(turn for turn, _ in last.values()) > 1
    write_trace(settings, tmp_path / "chats.csv")
    spec = {"name": "g", "seed": 0, "trace": {"path": "chats.csv", "preset": "azure", "conversation": {}, "columns": {
        "arrival": "TIMESTAMP", "prompt_tokens": "ContextTokens", "output_tokens": "GeneratedTokens",
        "session": "session", "turn": "turn", "think_s": "think_s"}}}
    (tmp_path / "g.yaml").write_text(json.dumps(spec))
    plan = build_plan(load_spec(tmp_path / "g.yaml"))
    assert [r.turn for r in plan.requests] == columns["turn"].tolist()
