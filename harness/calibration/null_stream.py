"""A zero-cost OpenAI-style streaming endpoint: FOR CALIBRATING THE CLIENT ONLY.

It generates nothing. Every completion streams `max_tokens` copies of one pre-built
token event, in the byte shape vLLM 0.32 sends (`CompletionStreamResponse` dumped with
`exclude_unset`: id, object, created, model, one choice with text, logprobs,
finish_reason, stop_reason and, when asked for with `return_token_ids`, the token's id;
running usage when `stream_options.continuous_usage_stats`; a final usage chunk when
`include_usage`; then `[DONE]`), each event its own HTTP chunk, as uvicorn frames them.
So a client reads, parses and records exactly what it would from vLLM, and the figure it
reaches here is the client's own ceiling. Runs against it say nothing about any server:
its answers carry `x-batchbench-calibration: null-stream`, its model list says
`owned_by: batchbench-calibration`, and the harness marks such runs (harness.calibration).

How it streams: one loop of "steps", like an engine whose steps cost nothing. Each
step writes one token event to every stream whose socket can take it, then yields to
the event loop (or sleeps until the next step, with `step_interval_s`, to pace streams
for latency and memory tests). A request's first token goes out as soon as its request
is read. A stream whose client lags (the transport's buffer past its high-water mark)
skips steps until it drains, and when no stream can take a byte the loop sleeps, so a
slow client never makes it spin. Also served: `/v1/models`, a non-streamed completion
(the driver's warm-up), and `/metrics` with the vLLM gauge and counter names the
driver's telemetry polls (requests running, tokens generated), so that path runs too.
No /tokenize: the driver then trusts its local tokenizer, as for any server without it.

Prompt tokens in usage are the prompt's whitespace-separated words (a list of ids: its
length): exact for the word-level tokenizer of the local tiny model, an estimate for
any other; nothing here can tokenize.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CALIBRATION_HEADER = b"x-batchbench-calibration: null-stream"
CALIBRATION_OWNER = "batchbench-calibration"
DEFAULT_MODEL = "calibration-null-stream"
# OpenAI's default when a request names no max_tokens.
DEFAULT_MAX_TOKENS = 16
MAX_MODEL_LEN = 1_000_000
TOKEN_TEXT = " x"
TOKEN_ID = 42
# A request head or body past this is refused: nothing legitimate sends one.
MAX_REQUEST_BYTES = 16 * 2**20


@dataclass(frozen=True)
class StreamOptions:
    """What one completion request asked for, as far as this endpoint honours it."""

    model: str
    max_tokens: int
    prompt_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    token_ids: bool


def parse_completion(body: bytes, model: str) -> StreamOptions:
    """The options of a /v1/completions body; ValueError (the 400's text) when it is not one."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"body is not JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise ValueError("body is not a JSON object")
    max_tokens = request.get("max_tokens", DEFAULT_MAX_TOKENS)
    if type(max_tokens) is not int or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, not {max_tokens!r}")
    prompt = request.get("prompt", "")
    if isinstance(prompt, str):
        prompt_tokens = len(prompt.split())
    elif isinstance(prompt, list) and all(type(token) is int for token in prompt):
        prompt_tokens = len(prompt)
    else:
        raise ValueError("prompt must be a string or a list of token ids")
    options = request.get("stream_options") or {}
    return StreamOptions(
        model=str(request.get("model") or model),
        max_tokens=max_tokens,
        prompt_tokens=prompt_tokens,
        stream=bool(request.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
        continuous_usage=bool(options.get("continuous_usage_stats", False)),
        token_ids=bool(request.get("return_token_ids", False)),
    )


def _chunk(payload: bytes) -> bytes:
    """`payload` as one chunk of a chunked HTTP body."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class CompletionEvents:
    """The bytes of one streamed completion, built once per request, cheap per token.

    Each token event is a constant head and tail; with continuous usage only the two
    running counts differ, formatted in between.
    """

    def __init__(self, options: StreamOptions, request_id: str, created: int) -> None:
        self.options = options
        meta = _compact({"id": request_id, "object": "text_completion", "created": created, "model": options.model})
        ids = f',"token_ids":[{TOKEN_ID}]' if options.token_ids else ""
        choice = f'"choices":[{{"index":0,"text":{json.dumps(TOKEN_TEXT)},"logprobs":null,"finish_reason":'
        self._head = f"data: {meta[:-1]},{choice}".encode()
        self._open = f'null,"stop_reason":null{ids}}}]'.encode()
        self._last = f'"length","stop_reason":null{ids}}}]'.encode()
        self._meta = meta[:-1].encode()
        p = options.prompt_tokens
        self._usage_head = b',"usage":{"prompt_tokens":%d,"total_tokens":' % p
        # Without running usage every token but the last is the same bytes.
        self._constant = _chunk(self._head + self._open + b"}\n\n")

    def token(self, k: int) -> bytes:
        """The HTTP chunk of token `k` (1-based) of `max_tokens`."""
        last = k == self.options.max_tokens
        if not self.options.continuous_usage:
            return _chunk(self._head + self._last + b"}\n\n") if last else self._constant
        usage = self._usage_head + b'%d,"completion_tokens":%d}}\n\n' % (self.options.prompt_tokens + k, k)
        return _chunk(self._head + (self._last if last else self._open) + usage)

    def ending(self) -> bytes:
        """What follows the last token: the usage chunk (if asked for), [DONE], the body's end."""
        ending = b""
        if self.options.include_usage:
            p, n = self.options.prompt_tokens, self.options.max_tokens
            usage = b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (p, p + n, n)
            ending += _chunk(b"data: " + self._meta + b',"choices":[],' + usage + b"}\n\n")
        return ending + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    def whole(self) -> dict[str, Any]:
        """The non-streamed answer (the driver's warm-up asks for one)."""
        p, n = self.options.prompt_tokens, self.options.max_tokens
        meta = json.loads(self._meta + b"}")
        return meta | {
            "choices": [{"index": 0, "text": TOKEN_TEXT * n, "logprobs": None, "finish_reason": "length",
                         "stop_reason": None}],
            "usage": {"prompt_tokens": p, "total_tokens": p + n, "completion_tokens": n},
        }


@dataclass(eq=False)
class _Stream:
    """One completion being streamed on one connection."""

    connection: _Connection
    events: CompletionEvents
    sent: int = 0


class NullStreamServer:
    """The endpoint's state: its streams, its step loop and its counters."""

    def __init__(self, model: str = DEFAULT_MODEL, root: str | None = None, step_interval_s: float = 0.0) -> None:
        self.model = model
        self.root = root
        self.step_interval_s = step_interval_s
        self.streams: set[_Stream] = set()
        self.generated_tokens = 0
        self.prompt_tokens = 0
        self.requests = 0
        self._wake = asyncio.Event()

    def protocol(self) -> _Connection:
        """A protocol instance for one accepted connection."""
        return _Connection(self)

    def start(self, stream: _Stream) -> None:
        """Send a new stream's first token now (a zero-cost prefill), then step it with the rest."""
        self._emit(stream)
        if stream.sent < stream.events.options.max_tokens:
            self.streams.add(stream)
            self._wake.set()

    def wake(self) -> None:
        """A stream's socket drained: the step loop may have something to write again."""
        self._wake.set()

    def drop(self, stream: _Stream) -> None:
        """Its connection closed: stop stepping the stream."""
        self.streams.discard(stream)

    async def run_steps(self) -> None:
        """Forever: one token to every stream that can take it, then the next step."""
        loop = asyncio.get_running_loop()
        next_step = loop.time()
        while True:
            written = 0
            for stream in list(self.streams):
                if not stream.connection.paused:
                    self._emit(stream)
                    written += 1
            if not written:
                # Nothing to write, or every client lags: sleep until a stream arrives or drains.
                self._wake.clear()
                await self._wake.wait()
                next_step = loop.time()
                continue
            if self.step_interval_s > 0:
                next_step += self.step_interval_s
                await asyncio.sleep(max(0.0, next_step - loop.time()))
            else:
                await asyncio.sleep(0)

    def _emit(self, stream: _Stream) -> None:
        stream.sent += 1
        self.generated_tokens += 1
        data = stream.events.token(stream.sent)
        if stream.sent == stream.events.options.max_tokens:
            self.streams.discard(stream)
            stream.connection.finish(data + stream.events.ending())
        else:
            stream.connection.write(data)

    def metrics(self) -> bytes:
        """A Prometheus exposition under vLLM's names, so the driver's telemetry path runs as against vLLM."""
        lines = [
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running {len(self.streams)}",
            "# TYPE vllm:num_requests_waiting gauge", "vllm:num_requests_waiting 0",
            "# TYPE vllm:kv_cache_usage_perc gauge", "vllm:kv_cache_usage_perc 0",
            "# TYPE vllm:generation_tokens counter", f"vllm:generation_tokens_total {self.generated_tokens}",
            "# TYPE vllm:prompt_tokens counter", f"vllm:prompt_tokens_total {self.prompt_tokens}",
            "# TYPE vllm:num_preemptions counter", "vllm:num_preemptions_total 0",
        ]
        return ("\n".join(lines) + "\n").encode()

    def models(self) -> bytes:
        """The /v1/models answer: one model, owned by the calibration target."""
        entry = {"id": self.model, "object": "model", "owned_by": CALIBRATION_OWNER, "root": self.root,
                 "max_model_len": MAX_MODEL_LEN}
        return _compact({"object": "list", "data": [entry]}).encode()


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: reads requests one after another, answers each."""

    def __init__(self, server: NullStreamServer) -> None:
        self.server = server
        self.transport: asyncio.WriteTransport | None = None
        self.paused = False
        # The completion streaming on this connection, if any.
        self.stream: _Stream | None = None
        self._buffer = b""
        self._busy = False
        self._close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; a TCP one always writes.
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None:
            self.server.drop(self.stream)
        self.transport = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.server.wake()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) > MAX_REQUEST_BYTES:
            self._answer(413, b"request too large", close=True)
            return
        self._next_request()

    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def finish(self, data: bytes) -> None:
        """Write a response's last bytes; then close, or read the next request."""
        self.write(data)
        self._busy = False
        self.stream = None
        if self._close_after and self.transport is not None:
            self.transport.close()
        else:
            self._next_request()

    def _next_request(self) -> None:
        if self._busy or self.transport is None:
            return
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self._buffer[:end].decode("latin-1").split("\r\n")
        headers = dict(_header(line) for line in head[1:])
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._answer(400, b"bad content-length", close=True)
            return
        if len(self._buffer) < end + 4 + length:
            return
        body = self._buffer[end + 4 : end + 4 + length]
        self._buffer = self._buffer[end + 4 + length :]
        self._close_after = headers.get("connection", "").lower() == "close"
        parts = head[0].split(" ")
        if len(parts) != 3:
            self._answer(400, b"bad request line", close=True)
            return
        self._busy = True
        self._route(parts[0], parts[1].split("?", 1)[0], body)

    def _route(self, method: str, path: str, body: bytes) -> None:
        routes: dict[tuple[str, str], Callable[[bytes], None]] = {
            ("GET", "/v1/models"): lambda _: self._answer(200, self.server.models(), "application/json"),
            ("GET", "/metrics"): lambda _: self._answer(200, self.server.metrics(), "text/plain; version=0.0.4"),
            ("GET", "/health"): lambda _: self._answer(200, b""),
            ("POST", "/v1/completions"): self._complete,
        }
        handler = routes.get((method, path))
        if handler is None:
            self._answer(404, _error(f"{method} {path}: the calibration endpoint serves only /v1/completions", 404),
                         "application/json")
        else:
            handler(body)

    def _complete(self, body: bytes) -> None:
        try:
            options = parse_completion(body, self.server.model)
        except ValueError as exc:
            self._answer(400, _error(str(exc), 400), "application/json")
            return
        server = self.server
        server.requests += 1
        server.prompt_tokens += options.prompt_tokens
        events = CompletionEvents(options, f"cmpl-calibration-{server.requests}", int(time.time()))
        if not options.stream:
            server.generated_tokens += options.max_tokens
            self._answer(200, _compact(events.whole()).encode(), "application/json")
            return
        self.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                   b"transfer-encoding: chunked\r\n" + CALIBRATION_HEADER + b"\r\n\r\n")
        self.stream = _Stream(self, events)
        server.start(self.stream)

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain", close: bool = False) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}[status]
        self._close_after = self._close_after or close
        self.finish(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n".encode()
            + CALIBRATION_HEADER + b"\r\n\r\n" + body
        )


def _header(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


def _compact(value: Any) -> str:
    """JSON without spaces, as vLLM's pydantic dumps it."""
    return json.dumps(value, separators=(",", ":"))


def _error(message: str, status: int) -> bytes:
    kind = "NotFoundError" if status == 404 else "BadRequestError"
    return _compact({"error": {"message": message, "type": kind, "code": status}}).encode()


async def serve(server: NullStreamServer, host: str, port: int, ready: Callable[[str], None] | None = None) -> None:
    """Listen on host:port (0: a free port) and serve until cancelled; `ready(base_url)` once listening."""
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(server.protocol, host, port, backlog=4096)
    bound = listener.sockets[0].getsockname()
    steps = asyncio.ensure_future(server.run_steps())
    if ready is not None:
        ready(f"http://{host}:{bound[1]}")
    try:
        async with listener:
            await listener.serve_forever()
    finally:
        steps.cancel()
