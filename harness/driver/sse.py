"""Incremental decoding of an OpenAI-style server-sent-event stream.

Bytes arrive in arbitrary pieces (a TCP read may hold half an event, or several);
the decoder returns each complete `data:` payload as soon as its terminating blank
line has arrived: as raw bytes (`feed_payloads`, validated by the caller) or parsed
as JSON (`feed`, `feed_line`).
"""

from __future__ import annotations

import json
from typing import Any

DONE = b"[DONE]"


class SSEDecoder:
    """Feed raw bytes, get back the payloads of the events completed so far."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self.done = False

    def feed_line(self, line: bytes) -> dict[str, Any] | None:
        """Add one whole line (as a line reader returns it); the event it completes, if any.

        The cheap path for a client that already reads line by line: no re-buffering.
        """
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            self._data.append(line[5:].lstrip())
            return None
        if line or not self._data:
            return None
        payload, self._data = b"\n".join(self._data), []
        if payload == DONE:
            self.done = True
            return None
        return json.loads(payload)

    def feed_payloads(self, data: bytes) -> list[bytes]:
        """Add bytes; return the raw `data:` payloads they complete (`[DONE]` sets `done`).

        Bytes, not text: a payload that is not UTF-8 is the caller's to reject as such.
        """
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        # One split for every event the bytes complete; the unfinished tail waits for more.
        events = (self._buffer + data if self._buffer else data).split(b"\n\n")
        self._buffer = events.pop()
        payloads: list[bytes] = []
        for raw in events:
            if raw.startswith(b"data:") and b"\n" not in raw:
                # The usual event, one data line: no line splitting.
                payload = raw[5:].lstrip()
            else:
                payload = b"\n".join(line[5:].lstrip() for line in raw.split(b"\n") if line.startswith(b"data:"))
            if not payload:
                continue
            if payload == DONE:
                self.done = True
                continue
            payloads.append(payload)
        return payloads

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add bytes; return the events they complete, parsed as JSON."""
        return [json.loads(payload) for payload in self.feed_payloads(data)]
