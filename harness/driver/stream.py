"""Reading one streamed completion: count the tokens that arrive, judge what the server said.

Pure: fed bytes and their arrival times, no I/O, so it is unit-tested on bytes. Each
`data:` payload is checked against the chunk shape (pydantic, strict types: usage
given as strings or booleans is malformed, not a count).

Tokens are counted from the stream itself. The request asks for `return_token_ids`
(vLLM sends each chunk's token ids; llama-server names each sampled token's id in the
chunk's `logprobs`), and a chunk carrying k ids counts k tokens. A
server that sends no ids is counted from its running usage (`continuous_usage_stats`),
else one token per chunk with text. The server's final usage is kept beside the count,
never instead of it: when they disagree the request fails as a usage mismatch.
For a server that sends no ids the reader can keep the streamed text, to be
re-tokenised against its usage (harness.driver.backends).

A usage that contradicts its stream fails the request, whatever the server: a count
below one it gave earlier (`usage_decreased`); where ids were asked for, a stream
without them (`no_token_ids`); where none arrived, a usage past what the streamed text
can hold (`usage_beyond_text`, the rule in `text_can_hold`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, StrictInt, StrictStr, ValidationError

from harness.driver.outcome import (
    ERROR_EVENT,
    INCOMPLETE_STREAM,
    LENGTH_MISMATCH,
    MALFORMED_STREAM,
    NO_TOKEN_IDS,
    USAGE_BEYOND_TEXT,
    USAGE_DECREASED,
    USAGE_MISMATCH,
    Failure,
)
from harness.driver.sse import SSEDecoder

# Tokens a usage may claim per token its text shows: an honest stream's text shows at least
# half of them (text_can_hold).
CLAIMED_PER_SHOWN = 2
# And a few more, for short outputs: a character left unfinished at the end of a stream is
# up to 3 tokens of its bytes, held back by the server's detokenizer, so never streamed.
TEXT_SLACK_TOKENS = 3


class _Usage(BaseModel):
    model_config = ConfigDict(strict=True)

    prompt_tokens: NonNegativeInt | None = None
    completion_tokens: NonNegativeInt | None = None


class _Delta(BaseModel):
    content: StrictStr | None = None


class _TokenLogprob(BaseModel):
    # llama-server names the sampled token's id; OpenAI's own entries have none.
    id: StrictInt | None = None


class _Logprobs(BaseModel):
    content: list[_TokenLogprob] | None = None

    def token_ids(self) -> list[int] | None:
        """The sampled tokens' ids, where every entry names one."""
        if not self.content or any(entry.id is None for entry in self.content):
            return None
        return [entry.id for entry in self.content if entry.id is not None]


class _Choice(BaseModel):
    text: StrictStr | None = None
    delta: _Delta | None = None
    token_ids: list[StrictInt] | None = None
    logprobs: _Logprobs | None = None
    finish_reason: StrictStr | None = None

    def ids(self) -> list[int] | None:
        """The choice's new token ids: vLLM's `token_ids`, else the ids in llama-server's `logprobs`."""
        if self.token_ids is not None:
            return self.token_ids
        return self.logprobs.token_ids() if self.logprobs is not None else None


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
        # Choices with text, counted until token ids arrive (they are the count from then on).
        self.text_chunks = 0
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

    def verdict(self, requested: int, forced: bool = True, sends_done: bool = True, ids_asked: bool = False,
                retokenized: int = -1) -> Failure | None:
        """After the body ended: None if the stream was complete and counted what was asked.

        `forced`: the request forced its length; else `requested` was only a cap, and an
        output of another length is no failure (an empty one still is).
        `sends_done`: the server ends a stream with [DONE]; else a finish_reason ends it.
        `ids_asked`: the request asked for token ids; a stream that brought tokens but no ids fails.
        `retokenized`: the kept text's tokens by the run's tokenizer, -1 where not counted;
        where no ids arrived, a usage past what that text can hold fails (text_can_hold).
        """
        if sends_done and not self.done:
            return Failure(INCOMPLETE_STREAM, f"stream ended without [DONE] after {self.arrived} tokens")
        if not (sends_done or self.done or self.finished):
            return Failure(INCOMPLETE_STREAM, f"stream ended without a finish_reason after {self.arrived} tokens")
        contradiction = self._usage_fault(ids_asked, retokenized)
        if contradiction is not None:
            return contradiction
        if self.arrived != requested and (forced or self.arrived == 0):
            return Failure(LENGTH_MISMATCH, f"{self.arrived} tokens arrived, {requested} were asked for")
        return None

    def _usage_fault(self, ids_asked: bool, retokenized: int) -> Failure | None:
        """Where the count rests on ids that never came, or the usage contradicts what arrived."""
        if self.by_token_ids:
            if self.usage_completion >= 0 and self.usage_completion != self.arrived:
                return Failure(USAGE_MISMATCH,
                               f"server usage says {self.usage_completion} tokens, {self.arrived} token ids arrived")
            return None
        if ids_asked and self.arrived:
            return Failure(NO_TOKEN_IDS, f"{self.arrived} tokens counted from usage or text: no chunk carried token"
                                         " ids, though the request asked for them")
        if retokenized >= 0 and self.usage_completion > text_can_hold(self.text_chunks, retokenized):
            return Failure(USAGE_BEYOND_TEXT,
                           f"server usage says {self.usage_completion} tokens; its text came in {self.text_chunks}"
                           f" chunks and re-tokenises to {retokenized} tokens")
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
            if counted is not None and counted < self.usage_completion:
                # A count of tokens generated so far can only grow: one of the two is false.
                raise StreamFault(Failure(
                    USAGE_DECREASED, f"event {self._events}: usage says {counted} tokens after {self.usage_completion}"
                ))
        new, with_ids = 0, False
        for choice in chunk.choices:
            if choice.finish_reason is not None:
                self.finished = True
            ids = choice.ids()
            if ids is not None:
                with_ids = True
                new += len(ids)
        if self._pieces is not None:
            self._pieces.extend(_text(choice) for choice in chunk.choices)
        if with_ids:
            self.by_token_ids = True
        elif self.by_token_ids:
            new = 0
        else:
            texts = sum(bool(_text(choice)) for choice in chunk.choices)
            self.text_chunks += texts
            # No ids from this server: its running usage is the only count there is, else its chunks of text.
            new = texts if counted is None else max(counted - self.arrived, 0)
        if counted is not None:
            self.usage_completion = counted
        if new == 1:
            self.token_times.append(now)
        elif new:
            self.token_times.extend([now] * new)


def text_can_hold(text_chunks: int, retokenized: int) -> int:
    """The most tokens a usage may claim beside a stream's text, where no token ids arrived.

    The text shows its tokens two ways: its chunks with text (a server may stream one token
    a chunk whatever the text re-tokenises to) and its count by the run's tokenizer (a
    server may coalesce several tokens into one chunk); the larger is what it shows. An
    honest usage can still exceed both: a token may decode to nothing (a special token the
    server skips, bytes held back until a character is whole), and re-tokenising the whole
    text may merge pieces the model generated apart. So the claim may reach twice what the
    text shows, plus TEXT_SLACK_TOKENS: past that, more than half the tokens claimed (those
    3 aside) left no trace, which no honest stream of ordinary text does; random ids of a
    byte-level BPE, decoded as servers decode them, stay within it (tests/harness/driver/
    test_backends.py). Within the limit, a usage that differs from the text is not failed,
    but its row is not exact (Backend.length_exact). The price: a model whose output is
    mostly tokens that decode to nothing cannot be told from a lie by its text; on vLLM its
    token ids count it.
    """
    return CLAIMED_PER_SHOWN * max(text_chunks, retokenized) + TEXT_SLACK_TOKENS


def _text(choice: _Choice) -> str:
    """A choice's text: `text` in a completion, the delta's content in a chat completion."""
    return choice.text or (choice.delta and choice.delta.content) or ""


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
