"""A usage that contradicts its stream fails the row, end to end, for every backend (no vLLM).

A small OpenAI-style server on 127.0.0.1 streams completions the way each kind of server
does: honestly (one chunk per token, its text " ba" a token of the tiny model's word-level
tokenizer, token ids where they were asked for), or, for the odd requests of a lying
run, one short chunk with no token ids and a usage claiming every token asked for. The
real CLI runs against it: a lying run exits 1 with those rows failed under their kind, a
clean run exits 0 with every row ok and exact.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pandas as pd
import pytest

from harness.driver.backends import BACKENDS
from harness.driver.outcome import NO_TOKEN_IDS, USAGE_BEYOND_TEXT
from launchers import resolve_model

WORKLOAD = """\
name: lying-usage
seed: 1
num_requests: 4
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [8, 24], order: cycle}
arrival: {kind: burst}
"""
# The id of "ba" in the tiny model's vocabulary, and the text of that token in a stream.
TOKEN_ID = 3
TOKEN_TEXT = " ba"
# The kind each backend's lying rows fail with: vLLM was asked for token ids and got none.
LIE_KINDS = {"vllm": NO_TOKEN_IDS, "transformers": USAGE_BEYOND_TEXT, "openai": USAGE_BEYOND_TEXT}
# The kinds whose verdicts are those above (harness.driver.stream), here only run honestly: the
# command takes them, sends their fields and reads their streams end to end.
OTHER_KINDS = ["sglang", "tgi", "llamacpp", "trtllm"]


def event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def honest_events(body: dict) -> list[bytes]:
    """A stream as vLLM sends it for `body`: a chunk per token, ids (llama-server's in logprobs) and
    running usage if asked for."""
    tokens = body["max_tokens"]
    options = body.get("stream_options") or {}
    events = []
    for k in range(1, tokens + 1):
        choice: dict = {"index": 0, "text": TOKEN_TEXT, "finish_reason": "length" if k == tokens else None}
        if body.get("return_token_ids"):
            choice["token_ids"] = [TOKEN_ID]
        if body.get("n_probs"):
            # llama-server names the sampled token's id in its logprobs.
            choice["logprobs"] = {"content": [{"id": TOKEN_ID, "token": TOKEN_TEXT, "prob": 0.5}]}
        chunk: dict = {"object": "text_completion", "choices": [choice]}
        if options.get("continuous_usage_stats"):
            chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": k}
        events.append(event(chunk))
    return events


def lying_events(body: dict) -> list[bytes]:
    """One short chunk, no token ids, and a usage claiming every token asked for."""
    return [event({"object": "text_completion", "choices": [{"index": 0, "text": "ba", "finish_reason": "length"}]})]


def fake_server(model_dir: Path, lie: bool, closes_streams: bool = False) -> type[BaseHTTPRequestHandler]:
    """An OpenAI-style server's handler, of the tiny model; with `lie`, its odd requests' streams lie; with
    `closes_streams`, it closes each streamed response's connection a second after its last chunk, though
    the response said keep-alive, as llama-server does (harness.driver.backends)."""
    models = json.dumps({"object": "list", "data": [
        {"id": "tiny", "object": "model", "root": str(model_dir), "max_model_len": 2048}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            routes = {"/v1/models": models, "/health": b""}
            body = routes.get(self.path)
            self._send(200 if body is not None else 404, body if body is not None else b'{"detail":"Not Found"}')

        def do_POST(self) -> None:  # noqa: N802
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/completions" or not request.get("stream"):
                self._send(404, b'{"detail":"Not Found"}')
                return
            tag = re.search(r"-(\d+)$", self.headers.get("X-Request-Id", ""))
            lying = lie and tag is not None and int(tag.group(1)) % 2 == 1
            events = (lying_events if lying else honest_events)(request)
            usage = {"prompt_tokens": 16, "completion_tokens": request["max_tokens"],
                     "total_tokens": 16 + request["max_tokens"]}
            events += [event({"object": "text_completion", "choices": [], "usage": usage}), b"data: [DONE]\n\n"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for data in [*events, b""]:  # the empty chunk ends the body
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            if closes_streams:
                self.wfile.flush()
                time.sleep(1.0)
                self.close_connection = True

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return Path(resolve_model("tiny").path)


def batchbench_run(url: str, backend: str, model_dir: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    workload = tmp_path / "lying-usage.yaml"
    workload.write_text(WORKLOAD)
    # `transformers serve` lists no model: it is named by its directory, where the tokenizer is.
    model = str(model_dir) if backend == "transformers" else "tiny"
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", url,
         "--backend", backend, "--model", model, "--out", str(tmp_path / "run"), "--no-history", "--no-warmup",
         "--max-num-seqs", "4", "--stall-timeout-s", "10", "--first-byte-timeout-s", "10", *extra],
        capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize("backend", list(LIE_KINDS))
def test_a_usage_claiming_tokens_its_stream_never_showed_fails_the_row(backend, model_dir, tmp_path, serve_locally):
    with serve_locally(fake_server(model_dir, lie=True)) as url:
        result = batchbench_run(url, backend, model_dir, tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    rows = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert list(rows.request_id) == [0, 1, 2, 3]
    lied = rows.request_id % 2 == 1
    assert set(rows[lied].error_kind) == {LIE_KINDS[backend]}, rows[lied].error.tolist()
    assert not rows[lied].ok.any() and not rows[lied].length_exact.any()
    assert (rows[lied].usage_completion_tokens == rows[lied].requested_output_tokens).all()
    assert rows[~lied].ok.all()
    last = result.stderr.strip().splitlines()[-1]
    assert f"2 of 4 requests failed: 2 {LIE_KINDS[backend]}" in last, last


@pytest.mark.parametrize("backend", [*LIE_KINDS, *OTHER_KINDS])
def test_an_honest_stream_from_the_same_server_passes(backend, model_dir, tmp_path, serve_locally):
    with serve_locally(fake_server(model_dir, lie=False)) as url:
        result = batchbench_run(url, backend, model_dir, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert rows.ok.all() and (rows.completion_tokens == rows.requested_output_tokens).all()
    # The length is forced and known where the backend can force it: by ids (vLLM, SGLang's completions,
    # llama-server), by usage and text (the others that force it).
    kind = BACKENDS[backend]
    assert rows.length_exact.all() == kind.forces_length
    if kind.retokenizes:
        assert (rows.retokenized_completion_tokens == rows.requested_output_tokens).all()
    if kind.forces_length:
        assert "not known to have the length asked for" not in result.stderr, result.stderr[-2000:]


def test_waves_against_a_server_that_closes_each_stream_pass_where_each_request_asks_to_close(
        model_dir, tmp_path, serve_locally):
    """Client-static waves of 2: the second wave goes out as the first ends, on the first wave's
    connections if kept. The llamacpp backend asks to close each one and passes; a backend that
    keeps them (vLLM's) loses the second wave to the server's late close (the control)."""
    waves = ("--system", "client-static", "--max-num-seqs", "2")
    for backend in ("llamacpp", "vllm"):
        (tmp_path / backend).mkdir()
    with serve_locally(fake_server(model_dir, lie=False, closes_streams=True)) as url:
        closing = batchbench_run(url, "llamacpp", model_dir, tmp_path / "llamacpp", *waves)
        kept = batchbench_run(url, "vllm", model_dir, tmp_path / "vllm", *waves)
    assert closing.returncode == 0, closing.stderr[-2000:]
    assert pd.read_parquet(tmp_path / "llamacpp" / "run" / "records.parquet").ok.all()
    assert kept.returncode == 1, kept.stderr[-2000:]
    rows = pd.read_parquet(tmp_path / "vllm" / "run" / "records.parquet")
    assert set(rows[~rows.ok].error_kind) == {"connection"} and set(rows[~rows.ok].wave) == {1}
