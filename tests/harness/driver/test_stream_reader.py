"""Judging one streamed completion from its bytes: counts, usage beside them, failure kinds."""

from __future__ import annotations

import json

import pytest

from harness.driver.outcome import (
    ERROR_EVENT,
    INCOMPLETE_STREAM,
    LENGTH_MISMATCH,
    MALFORMED_STREAM,
    NO_TOKEN_IDS,
    USAGE_BEYOND_TEXT,
    USAGE_DECREASED,
    USAGE_MISMATCH,
)
from harness.driver.stream import StreamFault, StreamReader, text_can_hold


def event(payload) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"


def chunk(ids: list[int], completion: int, text: str = "x") -> bytes:
    return event(
        {"choices": [{"text": text, "token_ids": ids}], "usage": {"prompt_tokens": 4, "completion_tokens": completion}}
    )


DONE = b"data: [DONE]\n\n"
GOOD = (
    chunk([1], 1)
    + chunk([2, 3], 3)
    + event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}})
    + DONE
)


def read(body: bytes, size: int | None = None, keep_text: bool = False) -> StreamReader:
    reader = StreamReader(keep_text)
    size = size or len(body) or 1
    for n, start in enumerate(range(0, len(body), size)):
        reader.feed(body[start : start + size], float(n))
    return reader


def test_token_ids_are_counted_with_one_time_per_token_whatever_the_split():
    for size in (1, 5, 64, None):
        reader = read(GOOD, size)
        assert reader.arrived == 3 and reader.by_token_ids
        assert (reader.usage_prompt, reader.usage_completion) == (4, 3)
        assert reader.verdict(3) is None
    assert read(GOOD).token_times == [0.0, 0.0, 0.0]


def test_without_token_ids_the_running_usage_counts():
    body = event({"choices": [{"text": "a"}], "usage": {"completion_tokens": 2}})
    body += event({"choices": [{"text": "b"}], "usage": {"completion_tokens": 5}}) + DONE
    reader = read(body)
    assert reader.arrived == 5 and not reader.by_token_ids and reader.verdict(5) is None


def test_without_ids_or_usage_one_token_per_chunk_with_text():
    body = event({"choices": [{"text": "a"}]}) + event({"choices": [{"delta": {"content": "b"}}]})
    body += event({"choices": [{"text": ""}]}) + DONE
    assert read(body).arrived == 2


def test_ids_named_in_logprobs_count_where_every_entry_names_one():
    """llama-server names each sampled token's id in its logprobs; OpenAI's entries name none."""
    def logprobs(entries: list[dict]) -> bytes:
        return event({"choices": [{"text": "x", "logprobs": {"content": entries}}]})

    named = logprobs([{"id": 7, "token": "x", "prob": 0.5}]) + logprobs([{"id": 0, "token": "", "prob": 0.1}])
    reader = read(named + DONE)
    assert reader.arrived == 2 and reader.by_token_ids and reader.verdict(2, ids_asked=True) is None
    unnamed = logprobs([{"token": "x", "logprob": -0.7}]) + logprobs([{"id": 3}, {"token": "y", "logprob": -1.0}])
    reader = read(unnamed + DONE)
    assert reader.arrived == 2 and not reader.by_token_ids
    assert reader.verdict(2, ids_asked=True).kind == NO_TOKEN_IDS
    # OpenAI's own completions logprobs (no content) and a null are no ids either.
    plain = event({"choices": [{"text": "x", "logprobs": {"tokens": ["x"], "token_logprobs": [-0.7]}}]})
    assert not read(plain + event({"choices": [{"text": "y", "logprobs": None}]}) + DONE).by_token_ids


def test_usage_that_disagrees_with_the_ids_that_arrived_is_its_own_failure():
    body = chunk([1], 1) + chunk([2], 5) + DONE
    failure = read(body).verdict(2)
    assert failure.kind == USAGE_MISMATCH and "5" in failure.message and "2 token ids" in failure.message


def test_fewer_tokens_than_asked_is_a_length_mismatch():
    failure = read(GOOD).verdict(4)
    assert failure.kind == LENGTH_MISMATCH and failure.message == "3 tokens arrived, 4 were asked for"


def test_zero_tokens_is_never_ok():
    assert read(DONE).verdict(1).kind == LENGTH_MISMATCH


def test_a_stream_without_done_is_incomplete():
    assert read(chunk([1], 1)).verdict(1).kind == INCOMPLETE_STREAM


BAD_EVENTS = {
    "not json": (b"{not json", MALFORMED_STREAM),
    "truncated json": (b'{"choices": [{"text": "a"', MALFORMED_STREAM),
    "non-utf-8 bytes": (b'{"choices": [{"text": "\xff\xfe"}]}', MALFORMED_STREAM),
    "a list": (b"[1, 2]", MALFORMED_STREAM),
    "a number": (b"42", MALFORMED_STREAM),
    "a string": (b'"hello"', MALFORMED_STREAM),
    "usage as strings": (b'{"choices": [], "usage": {"completion_tokens": "8"}}', MALFORMED_STREAM),
    "usage as a boolean": (b'{"choices": [], "usage": {"completion_tokens": true}}', MALFORMED_STREAM),
    "negative usage": (b'{"choices": [], "usage": {"completion_tokens": -3}}', MALFORMED_STREAM),
    "usage as a float": (b'{"choices": [], "usage": {"prompt_tokens": 1.5}}', MALFORMED_STREAM),
    "token ids as strings": (b'{"choices": [{"token_ids": ["1"]}]}', MALFORMED_STREAM),
    "choices not a list": (b'{"choices": {"text": "a"}}', MALFORMED_STREAM),
    "text a number": (b'{"choices": [{"text": 7}]}', MALFORMED_STREAM),
    "error object": (b'{"error": {"message": "out of memory", "code": 500}}', ERROR_EVENT),
    "error string": (b'{"error": "overloaded"}', ERROR_EVENT),
    "error beside choices": (b'{"choices": [{"text": "a"}], "error": {"message": "boom"}}', ERROR_EVENT),
}


@pytest.mark.parametrize("name", BAD_EVENTS)
def test_bad_events_fail_the_request_with_their_kind_and_one_line(name):
    payload, kind = BAD_EVENTS[name]
    reader = StreamReader()
    reader.feed(chunk([1], 1), 0.0)
    with pytest.raises(StreamFault) as caught:
        reader.feed(event(payload), 1.0)
    failure = caught.value.failure
    assert failure.kind == kind
    assert "\n" not in failure.line() and len(failure.line()) <= 300
    assert reader.arrived == 1


def test_an_error_event_says_the_servers_message():
    with pytest.raises(StreamFault) as caught:
        read(event({"error": {"message": "out of memory"}}))
    assert "out of memory" in caught.value.failure.message


def test_a_server_that_sends_no_done_ends_its_stream_with_a_finish_reason():
    text = event({"choices": [{"text": "a"}]}) + event({"choices": [{"text": "b"}]})
    finished = read(text + event({"choices": [{"text": "", "finish_reason": "length"}],
                                  "usage": {"prompt_tokens": 4, "completion_tokens": 2}}))
    assert finished.verdict(2, sends_done=False) is None
    assert finished.verdict(2).kind == INCOMPLETE_STREAM
    cut = read(text).verdict(2, sends_done=False)
    assert cut is not None and cut.kind == INCOMPLETE_STREAM and "without a finish_reason after 2 tokens" in cut.message
    # [DONE] still ends a stream of a server said to send none.
    assert read(text + DONE).verdict(2, sends_done=False) is None


def text_stream(pieces: list[str], usage: int | None, running: bool = False) -> bytes:
    """A stream without token ids: one chunk per piece (with a running usage if `running`), then `usage` if given."""
    body = b""
    for k, piece in enumerate(pieces, 1):
        payload: dict[str, object] = {"choices": [{"text": piece}]}
        if running:
            payload["usage"] = {"completion_tokens": k}
        body += event(payload)
    if usage is not None:
        body += event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": usage}})
    return body + DONE


def test_text_holds_twice_what_it_shows_plus_three():
    assert [text_can_hold(chunks, 3) for chunks in (0, 3, 5)] == [9, 9, 13]
    # A merge across chunks does not lower it: each chunk may have carried a token.
    assert text_can_hold(10, 7) == 23
    # No text at all: an unfinished character's bytes, held back, are up to 3 tokens.
    assert text_can_hold(0, 0) == 3


def test_one_short_chunk_claiming_every_token_asked_is_usage_beyond_text():
    reader = read(text_stream(["a"], 40), keep_text=True)
    assert reader.arrived == 40 and reader.text == "a" and reader.text_chunks == 1
    failure = reader.verdict(40, retokenized=1)
    assert failure.kind == USAGE_BEYOND_TEXT
    assert failure.message == "server usage says 40 tokens; its text came in 1 chunks and re-tokenises to 1 tokens"
    # The same when the length is only a cap (an OpenAI-compatible server), and for a running usage.
    assert reader.verdict(40, forced=False, retokenized=1).kind == USAGE_BEYOND_TEXT
    running = event({"choices": [{"text": "a"}], "usage": {"completion_tokens": 40}}) + DONE
    assert read(running).verdict(40, retokenized=1).kind == USAGE_BEYOND_TEXT


def test_an_honest_text_stream_passes_one_token_a_chunk_or_coalesced():
    pieces = ["a", " ba", " da", " ga", " a"] * 8
    assert read(text_stream(pieces, 40)).verdict(40, retokenized=40) is None
    assert read(text_stream(pieces, None, running=True)).verdict(40, retokenized=40) is None
    # A starved server sends several tokens a chunk: its text re-tokenises to all of them.
    coalesced = ["".join(pieces[k : k + 10]) for k in range(0, 40, 10)]
    assert read(text_stream(coalesced, 40)).verdict(40, retokenized=40) is None


def test_tokens_that_decode_to_nothing_pass_up_to_the_limit():
    """A claim of up to twice what the text shows, plus 3, passes (the row is then not exact); one more fails."""
    honest = read(text_stream(["a"] * 10, 23))
    assert honest.verdict(23, retokenized=10) is None
    assert read(text_stream(["a"] * 10, 24)).verdict(24, retokenized=10).kind == USAGE_BEYOND_TEXT
    # Re-tokenising merged the ten chunks into fewer tokens: the chunks still show ten.
    assert read(text_stream(["a"] * 10, 23)).verdict(23, retokenized=3) is None


def test_without_a_retokenised_count_or_with_ids_the_text_is_not_weighed():
    assert read(text_stream(["a"], 40)).verdict(40) is None
    with_ids = chunk([1, 2, 3, 4], 4, text="a") + DONE
    assert read(with_ids).verdict(4, retokenized=1) is None


def test_a_running_usage_that_decreases_fails_at_once():
    body = event({"choices": [{"text": "a"}], "usage": {"completion_tokens": 2}})
    body += event({"choices": [{"text": "b"}], "usage": {"completion_tokens": 1}})
    reader = StreamReader()
    with pytest.raises(StreamFault) as caught:
        reader.feed(body, 0.0)
    assert caught.value.failure.kind == USAGE_DECREASED
    assert caught.value.failure.message == "event 2: usage says 1 tokens after 2"
    assert reader.arrived == 2


def test_a_final_usage_below_the_running_one_decreases_too():
    with pytest.raises(StreamFault) as caught:
        read(chunk([1], 1) + chunk([2], 2) + event({"choices": [], "usage": {"completion_tokens": 1}}))
    assert caught.value.failure.kind == USAGE_DECREASED
    # A repeated count is no decrease: the final usage repeats the last running one.
    assert read(GOOD).verdict(3) is None


def test_a_stream_without_the_token_ids_asked_for_is_its_own_failure():
    no_ids = text_stream(["a", "b", "c"], 3)
    failure = read(no_ids).verdict(3, ids_asked=True)
    assert failure.kind == NO_TOKEN_IDS and failure.message.startswith("3 tokens counted from usage or text")
    # Counted by usage alone, without any text.
    assert read(text_stream([], 3)).verdict(3, ids_asked=True).kind == NO_TOKEN_IDS
    assert read(GOOD).verdict(3, ids_asked=True) is None
    # Nothing arrived: the length is what is wrong.
    assert read(DONE).verdict(3, ids_asked=True).kind == LENGTH_MISMATCH
