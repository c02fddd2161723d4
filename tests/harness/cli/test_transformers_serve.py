"""Runs against a real `transformers serve`, in both of its modes, through the real CLI.

Every planned request is accounted for; an ok request has exactly the length asked for
by its usage and by its re-tokenised text, or the run says it is not exact; and the
faults that apply to a server without vLLM's extensions are recorded, not crashed on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pandas as pd
import psutil
import pytest

from launchers.process import group_members
from launchers.transformers_server import TransformersSpec, start_transformers

# It closes the pooled vLLM server (two servers would share two cores): after every test that shares it.
pytestmark = [pytest.mark.server, pytest.mark.ends_pooled_server("own_servers")]

WORKLOAD = """\
name: hf-spread
seed: 5
num_requests: 8
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [8, 24, 40], order: cycle}
arrival: {kind: burst}
"""
STALL_TIMEOUT_S = "6"
# Sequential mode serves one request at a time: the last of 8 waits for the other 7.
FIRST_BYTE_TIMEOUT_S = "60"
# Fault -> the error_kind of every request it strikes (tests/fault_proxy.py strikes the odd ones).
FAULT_KINDS = {"truncate": "incomplete_stream", "cut": "connection", "stall": "stall"}


@pytest.fixture(scope="module")
def hf_server(servers, tmp_path_factory):
    """A continuous-batching `transformers serve` of the tiny model, alone on the machine."""
    servers.close()
    with start_transformers(TransformersSpec(mode="hf-continuous"),
                            log_dir=tmp_path_factory.mktemp("hf-continuous")) as server:
        # Its first request sets up the paged cache (~8 s here): longer than a stall, so done before any test.
        body = {"model": server.served_model, "prompt": "hello", "max_tokens": 2}
        httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120).raise_for_status()
        yield server


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "hf-spread.yaml"
    path.write_text(WORKLOAD)
    return path


def batchbench_run(workload, out, *target: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--out", str(out), "--no-history",
         "--max-num-seqs", "4", "--stall-timeout-s", STALL_TIMEOUT_S, "--first-byte-timeout-s", FIRST_BYTE_TIMEOUT_S,
         *target],
        capture_output=True, text=True, timeout=300,
    )


def at(server, system: str = "hf-continuous") -> list[str]:
    """The options that aim a run at `server`."""
    return ["--endpoint", server.base_url, "--backend", "transformers", "--model", server.served_model,
            "--system", system]


def ours_left(out) -> list[psutil.Process]:
    """Processes still running whose command line names this run's directory."""
    return [p for p in psutil.process_iter(["cmdline"]) if str(out) in " ".join(p.info["cmdline"] or [])]


def assert_exact(rows: pd.DataFrame) -> None:
    assert rows.ok.all() and rows.length_exact.all() and rows.length_forced.all()
    for column in ("completion_tokens", "usage_completion_tokens", "retokenized_completion_tokens"):
        assert (rows[column] == rows.requested_output_tokens).all(), rows[[column, "requested_output_tokens"]]


def test_continuous_batching_serves_every_request_at_its_exact_length(hf_server, workload, tmp_path):
    out = tmp_path / "run"
    result = batchbench_run(workload, out, *at(hf_server))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    assert sorted(set(rows.requested_output_tokens)) == [8, 24, 40]
    assert_exact(rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["system"] == "hf-continuous" and manifest["backend"] == "transformers"
    assert manifest["counts"]["inexact"] == 0


def test_sequential_mode_is_launched_served_and_stopped(workload, tmp_path):
    out = tmp_path / "run"
    result = batchbench_run(workload, out, "--launch", "hf-sequential")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ready at" in result.stderr and "Traceback" not in result.stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    assert_exact(rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["system"] == "hf-sequential"
    assert manifest["server"]["mode"] == "hf-sequential" and not manifest["server"]["continuous_batching"]
    assert manifest["server"]["server_distribution"] == "transformers"
    # One request at a time: no two streams overlap.
    spans = rows.sort_values("first_token_s")[["first_token_s", "end_s"]].to_numpy()
    assert all(later[0] >= earlier[1] - 0.05 for earlier, later in zip(spans, spans[1:], strict=False))
    assert ours_left(out) == []


@pytest.mark.parametrize("fault", FAULT_KINDS)
def test_a_fault_fails_the_requests_it_strikes_and_loses_none(hf_server, faulty, workload, tmp_path, fault):
    proxy = faulty(hf_server.base_url, fault)
    out = tmp_path / "run"
    result = batchbench_run(workload, out, "--endpoint", proxy.base_url, "--backend", "transformers",
                            "--model", hf_server.served_model, "--system", "hf-continuous", "--no-warmup")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    struck = rows.request_id % 2 == 1
    assert set(rows[struck].error_kind) == {FAULT_KINDS[fault]}, rows[struck].error.tolist()
    assert not rows[struck].length_exact.any()
    assert_exact(rows[~struck])
    assert f"4 of 8 requests failed: 4 {FAULT_KINDS[fault]}" in result.stderr.strip().splitlines()[-1]


def test_text_that_falls_short_of_the_usage_marks_the_run_not_exact(hf_server, faulty, workload, tmp_path):
    # The proxy drops one text chunk of each odd request; the usage still claims every token.
    proxy = faulty(hf_server.base_url, "drop_tokens")
    out = tmp_path / "run"
    result = batchbench_run(workload, out, "--endpoint", proxy.base_url, "--backend", "transformers",
                            "--model", hf_server.served_model, "--system", "hf-continuous", "--no-warmup")
    rows = pd.read_parquet(out / "records.parquet")
    struck = rows.request_id % 2 == 1
    assert not rows[struck].length_exact.any()
    assert (rows[struck].retokenized_completion_tokens < rows[struck].requested_output_tokens).all()
    assert_exact(rows[~struck])
    assert json.loads((out / "manifest.json").read_text())["counts"]["inexact"] == 4
    assert "4 of 8 ok requests are not known to have the length asked for" in result.stderr, result.stderr[-2000:]


def test_a_server_killed_mid_run_fails_what_it_owed_and_loses_none(servers, workload, tmp_path):
    servers.close()
    long = tmp_path / "long.yaml"
    long.write_text(WORKLOAD.replace("values: [8, 24, 40]", "values: [300, 400]"))
    out = tmp_path / "run"
    with start_transformers(TransformersSpec(mode="hf-sequential"), log_dir=tmp_path / "server") as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", "--workload", str(long), "--out", str(out), "--no-history",
             "--no-warmup", "--max-num-seqs", "4", "--stall-timeout-s", STALL_TIMEOUT_S, *at(server, "hf-sequential")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.time() + 120
        while not (out / "manifest.json").exists() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        os.killpg(server.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=300)
        assert group_members(server.pid) == []
    assert not server.temp_dir.path.exists()
    assert process.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(8))
    failed = rows[~rows.ok]
    assert len(failed) >= 6 and set(failed.error_kind) <= {"connection", "incomplete_stream"}, failed.error.tolist()
    assert ours_left(out) == []


def test_an_endpoint_without_a_model_list_needs_the_model_named(hf_server, workload, tmp_path):
    result = batchbench_run(workload, tmp_path / "run", "--endpoint", hf_server.base_url, "--backend", "transformers")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "batchbench: error: --backend transformers lists no served model: name it with --model"]
    assert not (tmp_path / "run").exists()
