"""The load users' HTTP transport against a scripted socket server: bodies, reuse and every break.

The server is a plain listening socket whose handler is scripted per test, so each byte the
transport sees is chosen here: what vLLM sends is covered by the fault-proxy tests
(tests/harness/cli/test_faults.py), which run `batchbench run` through this transport.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from harness.driver.llhttp_transport import LlhttpTransport

Handler = Callable[[socket.socket], None]


class ScriptedServer:
    """Accepts connections on loopback and runs `handler` on each in a thread of its own."""

    def __init__(self, handler: Handler) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self._handler = handler
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._handler, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Handler) -> ScriptedServer:
        servers.append(ScriptedServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def read_request(conn: socket.socket) -> bytes:
    """One whole request (head and Content-Length body), or b"" when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return b""
        data += piece
    head, body = data.split(b"\r\n\r\n", 1)
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def client(server: ScriptedServer, read_s: float = 5.0) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=httpx.Timeout(read_s, connect=2.0),
                        transport=LlhttpTransport(max_keepalive=4))


def test_a_streamed_body_arrives_piece_by_piece_while_the_server_is_still_sending(serve):
    first_read = threading.Event()

    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        # The rest is sent only once the client has seen the first piece: a buffering
        # transport would wait here forever and the test would time out.
        first_read.wait(5)
        conn.sendall(chunk(b"data: 2\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    server = serve(handler)
    pieces = []
    with client(server) as http, http.stream("POST", "/v1/completions", json={"stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for piece in response.iter_raw():
            pieces.append(piece)
            first_read.set()
    assert pieces[0] == b"data: 1\n\n"
    assert b"".join(pieces) == b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n"


def test_the_request_goes_out_whole_with_its_headers_and_body(serve):
    seen: list[bytes] = []

    def handler(conn: socket.socket) -> None:
        seen.append(read_request(conn))
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    server = serve(handler)
    with client(server) as http:
        response = http.post("/v1/completions", json={"prompt": "hi"}, headers={"X-Request-Id": "r-7"})
    assert response.text == "ok"
    head, body = seen[0].split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/completions HTTP/1.1\r\n")
    assert b"\r\nx-request-id: r-7" in head.lower()
    assert b"\r\nhost: 127.0.0.1:" in head.lower()
    assert body == b'{"prompt":"hi"}'


def test_a_finished_connection_is_kept_alive_and_reused(serve):
    def handler(conn: socket.socket) -> None:
        while read_request(conn):
            conn.sendall(CHUNKED_HEAD + chunk(b"data: x\n\n") + b"0\r\n\r\n")

    server = serve(handler)
    with client(server) as http:
        for _ in range(3):
            with http.stream("POST", "/v1/completions", json={}) as response:
                assert b"".join(response.iter_raw()) == b"data: x\n\n"
    assert server.accepted == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_not_used(serve):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        conn.close()

    server = serve(handler)
    with client(server) as http:
        assert http.get("/a").text == "ok"
        # Let the server's close reach the client's socket before it is picked from the pool.
        threading.Event().wait(0.2)
        assert http.get("/b").text == "ok"
    assert server.accepted == 2


def test_a_request_that_asks_to_close_is_never_followed_on_its_connection(serve):
    """llama-server says keep-alive, then closes a streamed response's connection just after its last
    chunk: a request sent on it before the close lands goes unanswered. One that asked to close is
    followed on a new connection, even where the server's answer still says keep-alive."""
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + chunk(b"data: x\n\n") + b"0\r\n\r\n")
        threading.Event().wait(1.0)
        conn.close()

    server = serve(handler)
    with client(server) as http:
        for _ in range(2):
            with http.stream("POST", "/v1/completions", json={}, headers={"Connection": "close"}) as response:
                assert b"".join(response.iter_raw()) == b"data: x\n\n"
        assert server.accepted == 2
        # The control: without it, the next request takes the kept connection, and the server is gone.
        with http.stream("POST", "/v1/completions", json={}) as response:
            response.read()
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)), http.stream("POST", "/a", json={}) as late:
            late.read()
    assert server.accepted == 3


def test_an_error_status_is_returned_with_its_body(serve):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 9\r\n\r\noverload!")

    server = serve(handler)
    with client(server) as http, http.stream("POST", "/v1/completions", json={}) as response:
        assert response.status_code == 503
        assert response.read() == b"overload!"


def test_a_body_cut_off_mid_stream_is_httpx_remote_protocol_error(serve):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        conn.close()

    server = serve(handler)
    pieces = []
    with (client(server) as http, http.stream("POST", "/v1/completions", json={}) as response,
          pytest.raises(httpx.RemoteProtocolError, match="closed the connection before the response ended")):
        for piece in response.iter_raw():
            pieces.append(piece)
    assert pieces == [b"data: 1\n\n"]


def test_a_reset_is_httpx_read_error(serve):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        # SO_LINGER 0: close sends RST instead of FIN.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()

    server = serve(handler)
    with (client(server) as http, http.stream("POST", "/v1/completions", json={}) as response,
          pytest.raises((httpx.ReadError, httpx.RemoteProtocolError))):
        for _ in response.iter_raw():
            threading.Event().wait(0.1)


def test_garbage_instead_of_http_is_httpx_remote_protocol_error(serve):
    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    server = serve(handler)
    with client(server) as http, pytest.raises(httpx.RemoteProtocolError, match="malformed HTTP response"):
        http.get("/v1/models")


def test_no_answer_within_the_read_timeout_is_httpx_read_timeout(serve):
    release = threading.Event()

    def handler(conn: socket.socket) -> None:
        read_request(conn)
        release.wait(10)

    server = serve(handler)
    try:
        with client(server, read_s=0.3) as http, pytest.raises(httpx.ReadTimeout, match="no byte within 0.3 s"):
            http.get("/v1/models")
    finally:
        release.set()


def test_nothing_listening_is_httpx_connect_error():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with (httpx.Client(base_url=f"http://127.0.0.1:{port}", transport=LlhttpTransport(max_keepalive=1)) as http,
          pytest.raises(httpx.ConnectError, match=f"connecting to 127.0.0.1:{port}")):
        http.get("/v1/models")
