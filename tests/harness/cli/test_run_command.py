"""`batchbench run` end to end against a real vLLM server (through the real CLI)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pyarrow.parquet as pq
import pytest

from harness.errors import ServerError
from harness.rundir.records import RECORD_SCHEMA, TELEMETRY_SCHEMA, TOKEN_SCHEMA
from harness.workload import build_plan, load_spec
from launchers.engine.vllm_releases import CPU_RELEASE

WORKLOAD = """\
name: small-spread
description: twelve short requests with spread outputs, sent at once
seed: 7
num_requests: 12
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [8, 16, 40], order: cycle}
arrival: {kind: burst}
"""


def batchbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(WORKLOAD)
    return path


def run_against(server, workload, out, *extra: str) -> subprocess.CompletedProcess:
    return batchbench(
        "run", "--workload", str(workload), "--endpoint", server.base_url, "--model", "tiny",
        "--max-num-seqs", "4", "--out", str(out), *extra,
    )


@pytest.mark.server
def test_a_run_records_every_request_and_token(servers, workload, tmp_path):
    server = servers.get("continuous", 4)
    out = tmp_path / "run"
    result = run_against(server, workload, out)
    assert result.returncode == 0, result.stderr[-2000:]
    # The pooled server states its B (vLLM's dev mode, tests/conftest.py); one that states none: test_prefix_cache.py.
    assert f"B = 4: stated by the server at {server.base_url} (/server_info?config_format=json)" in result.stderr

    records = pq.read_table(out / "records.parquet")
    assert records.schema.equals(RECORD_SCHEMA, check_metadata=False)
    assert pq.read_table(out / "tokens.parquet").schema.equals(TOKEN_SCHEMA, check_metadata=False)
    assert pq.read_table(out / "telemetry.parquet").schema.equals(TELEMETRY_SCHEMA, check_metadata=False)
    rows = records.to_pandas()
    assert rows.ok.all() and not rows.length_mismatch.any()
    assert list(rows.completion_tokens) == [8, 16, 40] * 4 == list(rows.planned_output_tokens)
    assert (rows.prompt_tokens == 16).all()
    assert ((rows.sent_s < rows.first_token_s) & (rows.first_token_s <= rows.end_s)).all()
    assert rows.lateness_s.notna().all() and (rows.lateness_s >= 0).all()

    tokens = pd.read_parquet(out / "tokens.parquet")
    assert len(tokens) == rows.completion_tokens.sum()
    for request_id, group in tokens.groupby("request_id"):
        assert group.t_s.is_monotonic_increasing
        assert group.t_s.iloc[0] == rows.set_index("request_id").first_token_s[request_id]

    telemetry = pd.read_parquet(out / "telemetry.parquet")
    assert len(telemetry) >= 2 and telemetry.running.max() <= 4
    assert telemetry.generation_tokens_total.iloc[-1] - telemetry.generation_tokens_total.iloc[0] >= 12 * 8

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["counts"] == {
        "planned": 12, "not_due": 0, "sent": 12, "ok": 12, "failed": 0, "length_mismatch": 0, "unanswered": 0,
        "inexact": 0, "failures": {},
    }
    # Counted from the token ids that arrived, the server's usage beside them.
    assert (rows.usage_completion_tokens == rows.completion_tokens).all() and (rows.error_kind == "").all()
    assert manifest["host"]["cores"] >= 1 and manifest["locust_version"]
    # An attached server: nothing launched, and the version it reports of itself kept.
    assert manifest["server"] is None and manifest["server_version"] == CPU_RELEASE
    assert (out / "plan.json").read_bytes() == build_plan(load_spec(workload)).to_json()
    stats = (out / "locust" / "stats.csv").read_text()
    assert ",TTFT," in stats and ",E2E," in stats


@pytest.mark.server
def test_naive_waves_pad_and_wait_for_each_other(servers, workload, tmp_path):
    server = servers.get("continuous", 4)
    out = tmp_path / "naive"
    result = run_against(server, workload, out, "--system", "naive")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.wave) == [0] * 4 + [1] * 4 + [2] * 4
    # Waves of 4 over outputs cycling 8,16,40: every wave holds a 40, so every row asks for 40.
    assert (rows.requested_output_tokens == 40).all() and (rows.completion_tokens == 40).all()
    assert list(rows.planned_output_tokens) == [8, 16, 40] * 4
    waves = rows.groupby("wave").agg(first_sent=("sent_s", "min"), last_end=("end_s", "max"))
    assert (waves.first_sent.iloc[1:].to_numpy() >= waves.last_end.iloc[:-1].to_numpy()).all()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("name: [unclosed\n", "small.yaml"),
        (WORKLOAD.replace("kind: choice", "kind: zipf"), "output_tokens"),
        (WORKLOAD.replace("value: 16", "value: 0"), "prompt_tokens"),
        (WORKLOAD + "colour: blue\n", "colour"),
    ],
)
def test_bad_workloads_are_one_line_usage_errors(tmp_path, content, fragment):
    path = tmp_path / "small.yaml"
    path.write_text(content)
    result = batchbench(
        "run", "--workload", str(path), "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "o")
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr
    assert not (tmp_path / "o").exists()


def test_unreachable_endpoint(workload, tmp_path):
    result = batchbench(
        "run", "--workload", str(workload), "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "o")
    )
    assert result.returncode == 2 and "cannot reach http://127.0.0.1:9" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.server
def test_wrong_model_name(servers, workload, tmp_path):
    server = servers.get("continuous", 4)
    result = run_against(server, workload, tmp_path / "o", "--model", "gpt-17")
    assert result.returncode == 2 and "model 'gpt-17' is not served" in result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.server
@pytest.mark.ends_pooled_server("crashes")
def test_an_engine_crash_mid_run_is_recorded_by_run_and_reported_by_the_launcher(servers, tmp_path):
    # The pool's last server, the static one (tests/conftest.py): no test needs it after its crash.
    server = servers.get("static", 4)
    path = tmp_path / "long.yaml"
    # 32 x 1500 tokens at B = 4 is a minute of work: the kill lands mid-run even when the
    # engine's busy-wait starves this process for seconds (docs/process-layout.md).
    path.write_text(
        WORKLOAD.replace("values: [8, 16, 40]", "values: [1500]").replace("num_requests: 12", "num_requests: 32")
    )
    out = tmp_path / "crashed"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(path), "--system", "static", "--endpoint",
         server.base_url, "--model", "tiny", "--max-num-seqs", "4", "--out", str(out), "--no-warmup"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "records.jsonl").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    engine = next(p for p in map(psutil.Process, server.processes()) if "EngineCor" in p.name())
    os.kill(engine.pid, signal.SIGKILL)
    # The launcher sees the server go, and says why with its log's tail.
    deadline = time.monotonic() + 60
    with pytest.raises(ServerError, match="exited with code") as raised:
        while time.monotonic() < deadline:
            server.check()
            time.sleep(0.5)
    assert "last 40 lines of" in str(raised.value)
    _, stderr = process.communicate(timeout=300)
    servers.close()
    assert server.processes() == []
    assert not server.temp_dir.path.exists()
    # The run records the fault as failed requests, not a crash of the harness.
    assert process.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr and "requests failed" in stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert len(rows) == 32 and (~rows.ok).sum() >= 4
    assert (rows.loc[~rows.ok, "error"].str.len() > 0).all()
    assert json.loads((out / "manifest.json").read_text())["complete"]


@pytest.mark.server
@pytest.mark.ends_pooled_server("own_servers")
def test_sigterm_mid_run_stops_the_launched_server_and_keeps_the_records(servers, tmp_path, request):
    servers.close()  # this run launches its own server; two would share the cores
    path = tmp_path / "long.yaml"
    # 16 x 1500 tokens at B = 4 keep the run going for ~30 s, past any stall of this process.
    path.write_text(
        WORKLOAD.replace("values: [8, 16, 40]", "values: [8, 1500]").replace("num_requests: 12", "num_requests: 32")
    )
    out = tmp_path / "terminated"
    # Its own temp dir, empty: the server's files and the command's own must all be gone after.
    # A short path: vLLM's socket paths under it must fit in 107 bytes.
    temp_root = Path(tempfile.mkdtemp(prefix="bbt-"))
    request.addfinalizer(lambda: shutil.rmtree(temp_root, ignore_errors=True))
    before = {p.pid for p in psutil.process_iter()}
    # Eager: the start 8 s sooner without compiling; the run is stopped seconds in.
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(path), "--launch", "continuous",
         "--model", "tiny", "--max-num-seqs", "4", "--out", str(out), "--no-warmup", "--vllm-arg=--enforce-eager"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(temp_root)},
    )
    # The first 8-token requests finish at once and reach the journal within a second;
    # the 1500-token ones stream for several seconds more.
    deadline = time.time() + 300
    while not (out / "records.jsonl").exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "interrupted" in stderr
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and "vllm" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
    assert os.listdir(temp_root) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["complete"]
    # Every planned request has its row: the finished ones kept, the rest saying why not.
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(32))
    assert 1 <= rows.ok.sum() < 32
    assert set(rows.loc[~rows.ok, "error_kind"]) <= {"not_sent", "lost"}
    assert manifest["counts"]["unanswered"] == (~rows.ok).sum()


def journaling(run_dir: Path, *args: str) -> subprocess.Popen:
    """`batchbench ARGS`, started and returned once `run_dir` has journaled its first rows, still running."""
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (run_dir / "records.jsonl").exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, f"{args[0]} ended before {run_dir.name} could be killed"
    return process


@pytest.mark.server
def test_a_run_killed_outright_is_read_from_its_journals_and_analyze_names_what_is_missing(servers, tmp_path):
    server = servers.get("continuous", 4)
    path = tmp_path / "long.yaml"
    # 32 requests at B = 4, half of 1,500 tokens: the run is still going when the first rows are journaled.
    path.write_text(
        WORKLOAD.replace("values: [8, 16, 40]", "values: [8, 1500]").replace("num_requests: 12", "num_requests: 32")
    )
    out = tmp_path / "killed"
    process = journaling(out, "run", "--workload", str(path), "--endpoint", server.base_url, "--model", "tiny",
                         "--max-num-seqs", "4", "--out", str(out), "--no-warmup")
    time.sleep(1.5)  # past a journal flush
    process.kill()
    process.wait(timeout=30)
    assert not (out / "records.parquet").exists()

    refused = batchbench("analyze", str(out), "--out", str(tmp_path / "refused"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "killed before it wrote its tables" in line and "planned requests have no row (ids" in line
    assert "--allow-partial" in line and not (tmp_path / "refused").exists()

    partial = batchbench("analyze", str(out), "--out", str(tmp_path / "partial"), "--allow-partial")
    assert partial.returncode == 0, partial.stderr[-2000:]
    report = (tmp_path / "partial" / "report.md").read_text()
    assert report.startswith("# PARTIAL") and "killed before it wrote its tables" in report
    summary = json.loads((tmp_path / "partial" / "summary.json").read_text())
    (runs,) = summary["partial"]
    recorded = int(runs.split("(")[1].split(" rows")[0])
    assert 1 <= recorded < 32 and f"{32 - recorded} planned requests have no row" in runs


@pytest.mark.server
def test_a_reproduce_killed_in_its_second_repetition_leaves_readable_runs_and_analyze_names_the_cut_one(
        servers, tmp_path):
    server = servers.get("continuous", 4)
    path = tmp_path / "spread.yaml"
    # 8 requests at B = 4, half of 1,000 tokens: the kill, once the short ones are journaled (a flush a second),
    # lands while the long ones still stream; and the first repetition's three runs are two waves each.
    path.write_text(
        WORKLOAD.replace("values: [8, 16, 40]", "values: [8, 1000]").replace("num_requests: 12", "num_requests: 8")
    )
    out = tmp_path / "job"
    # Without --static-endpoint the job runs continuous, client-static and naive: continuous goes first in each
    # repetition.
    cut = out / "runs" / "continuous-small-spread-r2"
    process = journaling(cut, "reproduce", "--workloads", str(path), "--endpoint", server.base_url, "--model", "tiny",
                         "--max-num-seqs", "4", "--repetitions", "2", "--out", str(out), "--no-history")
    process.kill()
    process.wait(timeout=30)
    assert not (cut / "records.parquet").exists()
    whole = sorted(run.name for run in (out / "runs").iterdir() if (run / "records.parquet").exists())
    assert whole == ["client-static-small-spread-r1", "continuous-small-spread-r1", "naive-small-spread-r1"]

    # The report the first repetition left says how far the job got.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stage"].startswith("PRELIMINARY: 1 of 2 repetitions") and summary["partial"] == []

    runs = [str(run) for run in sorted((out / "runs").iterdir())]
    refused = batchbench("analyze", *runs, "--out", str(tmp_path / "refused"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(f"batchbench: error: {cut}: killed before it wrote its tables")
    assert "planned requests have no row" in line
    partial = batchbench("analyze", *runs, "--out", str(tmp_path / "partial"), "--allow-partial")
    assert partial.returncode == 0, partial.stderr[-2000:]
    summary = json.loads((tmp_path / "partial" / "summary.json").read_text())
    (cut_run,) = summary["partial"]
    assert cut_run.startswith(f"{cut.name}: killed before it wrote its tables")
    assert summary["metadata"]["runs"] == 4
