"""A fault-injecting HTTP proxy for tests: between the harness and a real vLLM server.

It forwards every request to the real server and passes the answer through, except
for the requests it is told to fault: the streamed completions whose plan index
(read from the harness's X-Request-Id, bb-<tag>-<index>) is odd, and, for the
`models_*` and `tokenize_*` faults, the server's /v1/models or /tokenize answer.
The even requests stream through untouched, so a test sees finished rows kept beside
the faulted ones. Runs its own asyncio loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
from collections.abc import Callable

import httpx

# The event of a faulted stream at which a mid-stream fault strikes (after some tokens).
STRIKE_AT = 3
INJECTED_ERROR = {"error": {"message": "injected by the fault proxy", "type": "InternalServerError", "code": 500}}

STREAM_FAULTS = (
    "http_500", "http_503", "reset_before_response", "cut", "truncate", "garbled", "non_utf8",
    "error_event", "usage_lie", "usage_strings", "drop_tokens", "stall", "stall_first", "reset",
)
MODEL_FAULTS = ("models_not_json", "models_list", "models_no_id", "models_other_name", "tokenize_not_json")
# Every completion without the harness's X-Request-Id (the warm-up's) answers 500.
WARM_UP_FAULT = "warm_up_500"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class FaultProxy:
    """Listen on 127.0.0.1, forward to `upstream`, apply `fault` (one of the tuples above)."""

    def __init__(self, upstream: str, fault: str) -> None:
        if fault not in (*STREAM_FAULTS, *MODEL_FAULTS, WARM_UP_FAULT, "none"):
            raise ValueError(f"unknown fault {fault!r}")
        self.upstream = upstream.rstrip("/")
        self.fault = fault
        self.faulted = 0
        self.seen_headers: list[dict[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        self.base_url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop listening and end the loop's thread."""
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0))
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        await self._client.aclose()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, httpx.HTTPError):
            pass  # the client went away, or the fault itself closed the connection
        finally:
            if not writer.is_closing():
                writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        self.seen_headers.append(headers)
        length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
        body = await reader.readexactly(length)
        forwarded = {k: v for k, v in headers.items() if k.lower() not in HOP_HEADERS}
        if path.startswith("/v1/models") and self.fault.startswith("models_"):
            return await self._answer_models(writer, path, forwarded)
        if path.startswith("/tokenize") and self.fault == "tokenize_not_json":
            return self._write_whole(writer, 200, b"<html>tokenizer busy</html>", "text/html")
        if (
            self.fault == WARM_UP_FAULT
            and path.startswith("/v1/completions")
            and "x-request-id" not in map(str.lower, headers)
        ):
            return self._write_whole(writer, 500, json.dumps(INJECTED_ERROR).encode(), "application/json")
        request_id = re.search(r"-(\d+)$", next((v for k, v in headers.items() if k.lower() == "x-request-id"), ""))
        faulted = request_id is not None and int(request_id.group(1)) % 2 == 1 and self.fault in STREAM_FAULTS
        if faulted:
            self.faulted += 1
            if self.fault in ("http_500", "http_503"):
                status = int(self.fault[-3:])
                return self._write_whole(writer, status, json.dumps(INJECTED_ERROR).encode(), "application/json")
            if self.fault == "reset_before_response":
                return _reset(writer)
        async with self._client.stream(method, self.upstream + path, headers=forwarded, content=body) as response:
            writer.write(_status_line(response.status_code, response.headers.get("content-type", "text/plain")))
            edit = _stream_editor(self.fault) if faulted else None
            buffer = b""
            async for data in response.aiter_raw():
                if edit is None:
                    writer.write(_chunk(data))
                    await writer.drain()
                    continue
                buffer += data
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    action = edit(event + b"\n\n")
                    if isinstance(action, bytes):
                        writer.write(_chunk(action))
                        await writer.drain()
                    elif action == "cut":
                        writer.transport.abort()
                        return
                    elif action == "truncate":
                        writer.write(b"0\r\n\r\n")
                        await writer.drain()
                        return
                    elif action == "reset":
                        return _reset(writer)
                    elif action == "stall":
                        # Send nothing more; return once the client gives up and closes.
                        await reader.read(1)
                        return
            writer.write(_chunk(buffer) + b"0\r\n\r\n" if buffer else b"0\r\n\r\n")
            await writer.drain()

    async def _answer_models(self, writer: asyncio.StreamWriter, path: str, headers: dict[str, str]) -> None:
        real = (await self._client.get(self.upstream + path, headers=headers)).json()
        if self.fault == "models_not_json":
            body = b"<html>502 Bad Gateway</html>"
        elif self.fault == "models_list":
            body = json.dumps(real["data"]).encode()
        elif self.fault == "models_no_id":
            body = json.dumps({"data": [{k: v for k, v in m.items() if k != "id"} for m in real["data"]]}).encode()
        else:
            body = json.dumps({"data": [{**m, "id": "another-model"} for m in real["data"]]}).encode()
        self._write_whole(writer, 200, body, "application/json")

    @staticmethod
    def _write_whole(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + body
        )


def _stream_editor(fault: str) -> Callable[[bytes], bytes | str]:
    """A function from each SSE event (bytes) to what to send instead, or an action name."""
    count = {"n": 0}

    def edit(event: bytes) -> bytes | str:
        count["n"] += 1
        strike = count["n"] == STRIKE_AT
        if fault in ("cut", "truncate", "reset", "stall") and strike:
            return fault
        if fault == "stall_first":
            return "stall"
        if fault == "garbled" and strike:
            return b'data: {"choices": [{"text": "a", "tok\n\n'
        if fault == "non_utf8" and strike:
            return b'data: {"choices": [{"text": "\xff\xfe\xfd"}]}\n\n'
        if fault == "error_event" and strike:
            return b"data: " + json.dumps(INJECTED_ERROR).encode() + b"\n\n" + event
        if fault == "drop_tokens" and strike:
            return b""
        if fault in ("usage_lie", "usage_strings") and event.startswith(b"data: {"):
            payload = json.loads(event[6:])
            usage = payload.get("usage")
            if usage:
                if fault == "usage_lie":
                    usage["completion_tokens"] += 5
                else:
                    payload["usage"] = {k: str(v) for k, v in usage.items()}
            return b"data: " + json.dumps(payload).encode() + b"\n\n"
        return event

    return edit


def _status_line(status: int, content_type: str) -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n" if data else b""


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a crashed peer or middlebox would."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
