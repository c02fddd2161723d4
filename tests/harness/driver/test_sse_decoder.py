"""SSE decoding across arbitrary byte boundaries."""

from __future__ import annotations

from harness.driver.sse import SSEDecoder

STREAM = (
    b'data: {"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}\n\n'
    b'data: {"choices":[{"text":"b c"}],"usage":{"completion_tokens":3}}\r\n\r\n'
    b": keep-alive comment\n\n"
    b"data: [DONE]\n\n"
)


def test_events_complete_only_at_their_blank_line_whatever_the_split():
    for size in (1, 2, 7, 64, len(STREAM)):
        decoder = SSEDecoder()
        events = []
        for start in range(0, len(STREAM), size):
            events += decoder.feed(STREAM[start : start + size])
        assert [e["usage"]["completion_tokens"] for e in events] == [1, 3]
        assert decoder.done


def test_nothing_before_the_terminating_blank_line():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"x": 1}\n') == []
    assert decoder.feed(b"\n") == [{"x": 1}]
    assert not decoder.done


def test_line_feeding_gives_the_same_events_as_byte_feeding():
    decoder = SSEDecoder()
    events = [event for line in STREAM.splitlines(keepends=True) if (event := decoder.feed_line(line))]
    assert [e["usage"]["completion_tokens"] for e in events] == [1, 3]
    assert decoder.done
