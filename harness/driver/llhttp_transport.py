"""An httpx transport for the load users that parses HTTP/1.1 in C (httptools, i.e. llhttp).

Why: at tens of thousands of streamed tokens per second, httpx's default transport
(httpcore over h11) parses each SSE event's chunk in Python and costs about twice what the
whole recording path does; a client that slow turns a server benchmark into a client
benchmark (docs/validation/client-ceiling.md). httptools is the parser uvicorn serves vLLM
with. Everything above the wire stays httpx: the users keep `client.stream(...)`,
`iter_raw()` and httpx's exception types, which this module raises at its one boundary.

One request per connection at a time, kept alive and reused (unless the request asked to
close it); plain TCP or TLS. Sockets are gevent's under Locust's monkey-patching, so a read
blocks only its own greenlet.
"""

from __future__ import annotations

import functools
import select
import socket
import ssl
from collections.abc import Callable, Iterator

import httptools
import httpx

_READ_SIZE = 1 << 16


class _Parsed:
    """One response being parsed: its llhttp parser, and the headers and body pieces its callbacks hand over."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.keep_alive = False
        self.complete = False
        self.body: list[bytes] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        # Asked now: llhttp forgets it once the message completes, maybe within the same read.
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class _Connection:
    """One socket to the server and the parser of the response now being read on it."""

    def __init__(self, sock: socket.socket, read_timeout: float | None) -> None:
        self.sock = sock
        self.start_response(read_timeout)

    def start_response(self, read_timeout: float | None) -> None:
        """Ready a fresh parser for the next response; `read_timeout` bounds each read."""
        self.sock.settimeout(read_timeout)
        self.parsed = _Parsed()

    def receive(self) -> None:
        """Read what has arrived into the parser; httpx's error when the server broke off."""
        try:
            data = self.sock.recv(_READ_SIZE)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no byte within {self.sock.gettimeout():g} s") from exc
        except OSError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc
        if not data:
            raise httpx.RemoteProtocolError("the server closed the connection before the response ended")
        try:
            self.parsed.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise httpx.RemoteProtocolError(f"malformed HTTP response: {exc}") from exc

    def reusable(self) -> bool:
        """Whether the response ended cleanly with keep-alive, so the next request may use it."""
        return self.parsed.complete and self.parsed.keep_alive

    def idle_and_open(self) -> bool:
        """An idle kept-alive socket is readable only when the server closed it (or broke protocol)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        self.sock.close()


class _Body(httpx.SyncByteStream):
    """A response body as it arrives: one piece per socket read, dechunked by llhttp."""

    def __init__(self, connection: _Connection, release: Callable[[_Connection], None]) -> None:
        self._connection = connection
        self._release = release

    def __iter__(self) -> Iterator[bytes]:
        parsed = self._connection.parsed
        while True:
            # The head's last read may already hold body pieces, or the whole body.
            if parsed.body:
                yield b"".join(parsed.body)
                parsed.body.clear()
            if parsed.complete:
                return
            self._connection.receive()

    def close(self) -> None:
        self._release(self._connection)


class LlhttpTransport(httpx.BaseTransport):
    """HTTP/1.1 with a C parser and a keep-alive pool per origin; httpx's errors at the boundary."""

    def __init__(self, max_keepalive: int) -> None:
        self._max_keepalive = max_keepalive
        self._pools: dict[tuple[str, str, int], list[_Connection]] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        origin = (request.url.scheme, request.url.host, request.url.port or _default_port(request.url.scheme))
        pool = self._pools.setdefault(origin, [])
        connection = self._pooled(pool, timeouts.get("read"))
        if connection is None:
            connection = _Connection(self._connect(origin, timeouts.get("connect")), timeouts.get("read"))
        try:
            self._send(connection, request)
            while not connection.parsed.headers_done:
                connection.receive()
        except BaseException:
            connection.close()
            raise
        # A client that asked to close sends nothing more on the connection, whatever the server answered.
        closing = request.headers.get("connection", "").lower() == "close"
        return httpx.Response(
            connection.parsed.parser.get_status_code(),
            headers=connection.parsed.headers,
            stream=_Body(connection, _Connection.close if closing else functools.partial(self._release, pool)),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    def close(self) -> None:
        for pool in self._pools.values():
            for connection in pool:
                connection.close()
            pool.clear()

    def _release(self, pool: list[_Connection], connection: _Connection) -> None:
        """Hand a finished connection back to its pool, or close it."""
        if connection.reusable() and len(pool) < self._max_keepalive:
            pool.append(connection)
        else:
            connection.close()

    @staticmethod
    def _pooled(pool: list[_Connection], read_timeout: float | None) -> _Connection | None:
        while pool:
            connection = pool.pop()
            if connection.idle_and_open():
                connection.start_response(read_timeout)
                return connection
            connection.close()
        return None

    def _connect(self, origin: tuple[str, str, int], timeout: float | None) -> socket.socket:
        scheme, host, port = origin
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port}: {exc}") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"connecting to {host}:{port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme == "https":
            try:
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise httpx.ConnectError(f"TLS to {host}:{port}: {exc}") from exc
        return sock

    @staticmethod
    def _send(connection: _Connection, request: httpx.Request) -> None:
        head = [f"{request.method} ".encode() + request.url.raw_path + b" HTTP/1.1"]
        head += [name + b": " + value for name, value in request.headers.raw]
        try:
            connection.sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + request.read())
        except TimeoutError as exc:
            raise httpx.WriteTimeout(f"sending the request: {exc}") from exc
        except OSError as exc:
            raise httpx.WriteError(f"{type(exc).__name__}: {exc}") from exc


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80
