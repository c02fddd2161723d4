"""Judging one streamed completion from its bytes: counts, usage beside them, failure kinds."""

from __future__ import annotations

import json

import pytest

from harness.driver.outcome import (
    ERROR_EVENT,
    INCOMPLETE_STREAM,
    LENGTH_MISMATCH,
    MALFORMED_STREAM,
    USAGE_MISMATCH,
)
from harness.driver.stream import StreamFault, StreamReader


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


def read(body: bytes, size: int | None = None) -> StreamReader:
    reader = StreamReader()
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
