"""Reading one streamed completion: count the tokens that arrive, judge what the server said.

Pure: fed bytes and their arrival times, no I/O, so it is unit-tested on bytes. Each
`data:` payload is checked against the chunk shape (pydantic, strict types: usage
given as strings or booleans is malformed, not a count).

Tokens are counted from the stream itself. The request asks for `return_token_ids`
(vLLM sends each chunk's token ids), and a chunk carrying k ids counts k tokens. A
server that sends no ids is counted from its running usage (`continuous_usage_stats`),
else one token per chunk with text. The server's final usage is kept beside the count,
never instead of it: when they disagree the request fails as a usage mismatch.
For a server that sends no ids the reader can keep the streamed text, to be
re-tokenised against its usage (harness.driver.backends).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, StrictInt, StrictStr, ValidationError

from harness.driver.outcome import (
    ERROR_EVENT,
    INCOMPLETE_STREAM,
    LENGTH_MISMATCH,
    MALFORMED_STREAM,
    USAGE_MISMATCH,
    Failure,
)
from harness.driver.sse import SSEDecoder


class _Usage(BaseModel):
    model_config = ConfigDict(strict=True)

    prompt_tokens: NonNegativeInt | None = None
    completion_tokens: NonNegativeInt | None = None


class _Delta(BaseModel):
    content: StrictStr | None = None


class _Choice(BaseModel):
    text: StrictStr | None = None
    delta: _Delta | None = None
    token_ids: list[StrictInt] | None = None
    finish_reason: StrictStr | None = None


class StreamChunk(BaseModel):
    """One `data:` event of a streamed completion (fields we do not use are ignored)."""

    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: Any = None


class StreamFault(Exception):
    """The stream said something no well-behaved server says; carries the Failure."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class StreamReader:
    """Feed a response body's bytes as they arrive; read off tokens, times and usage."""

    def __init__(self, keep_text: bool = False) -> None:
        self._decoder = SSEDecoder()
        # The streamed text's pieces, when kept; None: not kept (token ids are counted).
        self._pieces: list[str] | None = [] if keep_text else None
        self.token_times: list[float] = []
        self.by_token_ids = False
        # The server's own counts, -1 until it gives them.
        self.usage_prompt = -1
        self.usage_completion = -1
        # A choice said why it ended: the end of a stream that sends no [DONE].
        self.finished = False
        self._events = 0

    @property
    def arrived(self) -> int:
        """Tokens that arrived so far."""
        return len(self.token_times)

    @property
    def text(self) -> str | None:
        """The streamed text so far, or None when it is not kept."""
        return None if self._pieces is None else "".join(self._pieces)

    @property
    def done(self) -> bool:
        """True once [DONE] arrived."""
        return self._decoder.done

    def feed(self, data: bytes, now: float) -> None:
        """Take bytes that arrived at `now`; raise StreamFault on a malformed or error event."""
        for payload in self._decoder.feed_payloads(data):
            self._events += 1
            self._take(self._parse(payload), now)

    def verdict(self, requested: int, forced: bool = True, sends_done: bool = True) -> Failure | None:
        """After the body ended: None if the stream was complete and counted what was asked.

        `forced`: the request forced its length; else `requested` was only a cap, and an
        output of another length is no failure (an empty one still is).
        `sends_done`: the server ends a stream with [DONE]; else a finish_reason ends it.
        """
        if sends_done and not self.done:
            return Failure(INCOMPLETE_STREAM, f"stream ended without [DONE] after {self.arrived} tokens")
        if not (sends_done or self.done or self.finished):
            return Failure(INCOMPLETE_STREAM, f"stream ended without a finish_reason after {self.arrived} tokens")
        if self.by_token_ids and self.usage_completion >= 0 and self.usage_completion != self.arrived:
            return Failure(
                USAGE_MISMATCH, f"server usage says {self.usage_completion} tokens, {self.arrived} token ids arrived"
            )
        if self.arrived != requested and (forced or self.arrived == 0):
            return Failure(LENGTH_MISMATCH, f"{self.arrived} tokens arrived, {requested} were asked for")
        return None

    def _parse(self, payload: bytes) -> StreamChunk:
        # This runs once per token: the error messages are built only when there is an error.
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StreamFault(
                Failure(MALFORMED_STREAM, f"event {self._events} is not UTF-8 ({exc.reason} at byte {exc.start})")
            ) from exc
        try:
            chunk = StreamChunk.model_validate_json(text)
        except ValidationError as exc:
            problem = exc.errors()[0]
            field = ".".join(str(part) for part in problem["loc"])
            raise StreamFault(Failure(
                MALFORMED_STREAM,
                f"event {self._events}: {field + ': ' if field else ''}{problem['msg']}: {text[:80]!r}",
            )) from exc
        if chunk.error is not None:
            raise StreamFault(
                Failure(ERROR_EVENT, f"event {self._events}: server error event: {_error_text(chunk.error)}")
            )
        return chunk

    def _take(self, chunk: StreamChunk, now: float) -> None:
        usage = chunk.usage
        counted = None
        if usage is not None:
            if usage.prompt_tokens is not None:
                self.usage_prompt = usage.prompt_tokens
            counted = usage.completion_tokens
        new, with_ids = 0, False
        for choice in chunk.choices:
            if choice.finish_reason is not None:
                self.finished = True
            if choice.token_ids is not None:
                with_ids = True
                new += len(choice.token_ids)
        if self._pieces is not None:
            self._pieces.extend(_text(choice) for choice in chunk.choices)
        if with_ids:
            self.by_token_ids = True
        elif self.by_token_ids:
            new = 0
        elif counted is not None:
            # No ids from this server: its running usage is the only count there is.
            new = max(counted - self.arrived, 0)
        else:
            new = sum(bool(_text(choice)) for choice in chunk.choices)
        if counted is not None:
            self.usage_completion = counted
        if new == 1:
            self.token_times.append(now)
        elif new:
            self.token_times.extend([now] * new)


def _text(choice: _Choice) -> str:
    """A choice's text: `text` in a completion, the delta's content in a chat completion."""
    return choice.text or (choice.delta and choice.delta.content) or ""


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
