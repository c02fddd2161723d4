"""The calibration endpoint: its bytes read as a vLLM stream, and its HTTP answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from harness.calibration import CALIBRATION_OWNER, CompletionEvents, NullStreamServer, parse_completion, serve
from harness.calibration.marking import calibration_server_info, is_calibration_owner
from harness.driver.endpoint import probe_endpoint
from harness.driver.stream import StreamReader

FULL = {"include_usage": True, "continuous_usage_stats": True}


def body(**fields) -> bytes:
    return json.dumps({"model": "m", "prompt": "one two three", "stream": True} | fields).encode()


def unchunk(data: bytes) -> bytes:
    """The payload of a chunked HTTP body."""
    payload = b""
    while True:
        size_end = data.index(b"\r\n")
        size = int(data[:size_end], 16)
        if size == 0:
            return payload
        payload += data[size_end + 2 : size_end + 2 + size]
        data = data[size_end + 4 + size :]


def stream_bytes(options_body: bytes) -> bytes:
    options = parse_completion(options_body, "m")
    events = CompletionEvents(options, "cmpl-1", 7)
    return b"".join(events.token(k) for k in range(1, options.max_tokens + 1)) + events.ending()


@pytest.mark.parametrize(
    ("fields", "by_ids", "usage"),
    [
        ({"stream_options": FULL, "return_token_ids": True}, True, 5),
        ({"stream_options": FULL}, False, 5),
        ({"stream_options": {"include_usage": True}}, False, 5),
        ({}, False, -1),
    ],
    ids=["ids and running usage", "running usage", "final usage", "text only"],
)
def test_our_stream_reader_counts_exactly_max_tokens(fields, by_ids, usage):
    reader = StreamReader()
    reader.feed(unchunk(stream_bytes(body(max_tokens=5, **fields))), 1.0)
    assert reader.verdict(5) is None
    assert reader.arrived == 5 and reader.by_token_ids == by_ids
    assert reader.usage_completion == usage
    assert reader.usage_prompt == (3 if usage > 0 else -1)


def test_events_have_vllms_shape_and_the_last_token_says_length():
    payloads = [line for line in unchunk(stream_bytes(body(max_tokens=3, stream_options=FULL,
                                                           return_token_ids=True))).split(b"\n\n") if line]
    chunks = [json.loads(p.removeprefix(b"data: ")) for p in payloads[:-1]]
    assert payloads[-1] == b"data: [DONE]"
    assert [c["choices"][0]["finish_reason"] for c in chunks[:3]] == [None, None, "length"]
    assert chunks[0]["choices"][0] == {"index": 0, "text": " x", "logprobs": None, "finish_reason": None,
                                       "stop_reason": None, "token_ids": [42]}
    assert [c["usage"]["completion_tokens"] for c in chunks] == [1, 2, 3, 3]
    assert chunks[3]["choices"] == [] and chunks[3]["usage"] == {"prompt_tokens": 3, "total_tokens": 6,
                                                                "completion_tokens": 3}
    assert {c["object"] for c in chunks} == {"text_completion"}


@pytest.mark.parametrize(
    ("raw", "words"),
    [(b"not json", "not JSON"), (b"[1]", "not a JSON object"), (body(max_tokens=0), "max_tokens"),
     (body(max_tokens="8"), "max_tokens"), (body(prompt={"a": 1}), "prompt")],
)
def test_bad_requests_are_refused_with_a_reason(raw, words):
    with pytest.raises(ValueError, match=words):
        parse_completion(raw, "m")


def test_a_prompt_of_token_ids_counts_its_ids():
    assert parse_completion(body(prompt=[1, 2, 3, 4]), "m").prompt_tokens == 4


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[str, NullStreamServer]]:
    """The endpoint on a free port, served by an asyncio loop in a thread."""
    server_box: list[NullStreamServer] = []
    ready = threading.Event()
    urls: list[str] = []
    loop = asyncio.new_event_loop()

    def listening(url: str) -> None:
        urls.append(url)
        ready.set()

    def main() -> None:
        asyncio.set_event_loop(loop)
        server_box.append(NullStreamServer("calib", "/some/dir"))
        task = loop.create_task(serve(server_box[0], "127.0.0.1", 0, listening))
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield urls[0], server_box[0]
    for task in asyncio.all_tasks(loop):
        loop.call_soon_threadsafe(task.cancel)
    thread.join(10)


def test_the_model_list_marks_a_calibration_target_and_the_probe_sees_it(running):
    url, _ = running
    info = probe_endpoint(url, {}, None)
    assert (info.model, info.root, info.owned_by) == ("calib", "/some/dir", CALIBRATION_OWNER)
    assert is_calibration_owner(info.owned_by)
    assert calibration_server_info()["calibration_only"] is True


def test_streams_and_plain_answers_share_one_keep_alive_connection(running):
    url, server = running
    with httpx.Client(base_url=url, timeout=10) as client:
        for max_tokens in (1, 300):
            reader = StreamReader()
            with client.stream("POST", "/v1/completions", content=body(max_tokens=max_tokens, stream_options=FULL,
                                                                         return_token_ids=True)) as response:
                assert response.headers["x-batchbench-calibration"] == "null-stream"
                for data in response.iter_raw():
                    reader.feed(data, 1.0)
            assert reader.verdict(max_tokens) is None
        whole = client.post("/v1/completions", content=body(max_tokens=4, stream=False)).json()
        assert whole["usage"]["completion_tokens"] == 4 and whole["choices"][0]["text"] == " x" * 4
        metrics = client.get("/metrics").text
        assert "vllm:num_requests_running 0" in metrics
        assert f"vllm:generation_tokens_total {server.generated_tokens}" in metrics
        assert client.get("/v1/chat/completions").status_code == 404
        refused = client.post("/v1/completions", content=body(max_tokens=-1))
        assert refused.status_code == 400 and "max_tokens" in refused.json()["error"]["message"]


def test_many_concurrent_streams_each_get_all_their_tokens(running):
    url, _ = running

    async def one(client: httpx.AsyncClient, n: int) -> int:
        reader = StreamReader()
        async with client.stream("POST", "/v1/completions", content=body(max_tokens=n, stream_options=FULL,
                                                                          return_token_ids=True)) as response:
            async for data in response.aiter_raw():
                reader.feed(data, 1.0)
        assert reader.verdict(n) is None
        return reader.arrived

    async def main() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=10, limits=httpx.Limits(max_connections=64)) as client:
            return await asyncio.gather(*(one(client, 50 + i) for i in range(40)))

    assert asyncio.run(main()) == [50 + i for i in range(40)]
