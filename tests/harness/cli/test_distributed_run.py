"""`batchbench run --workers N` and `batchbench worker --master` against a real vLLM server.

One spec run by one process, by a master with 2 local workers, and by a master whose 2
workers attach as separate `batchbench worker` processes (loopback): every planned request
is accounted for exactly once, the same files and columns come out, and every request was
due at its planned offset from the run's one start instant. A few seconds of load each.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.driver.client_health import worst_case
from harness.rundir.manifest import ClientHealth
from harness.rundir.records import RECORD_SCHEMA, TELEMETRY_SCHEMA, TOKEN_SCHEMA
from harness.workload import build_plan, load_spec

# Open loop, ~2 s of arrivals: 40 requests at 20/s, outputs spread.
WORKLOAD = """\
name: distributed-poisson
description: forty short requests arriving at 20 per second
seed: 3
num_requests: 40
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [8, 16, 40], order: cycle}
arrival: {kind: poisson, rate: 20}
"""
BATCHBENCH = [sys.executable, "-m", "harness.cli"]


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("workload") / "poisson.yaml"
    path.write_text(WORKLOAD)
    return path


def run_args(server, workload: Path, out: Path, *extra: str) -> list[str]:
    return [*BATCHBENCH, "run", "--workload", str(workload), "--endpoint", server.base_url, "--model", "tiny",
            "--max-num-seqs", "4", "--out", str(out), "--no-warmup", *extra]


def run(server, workload: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(run_args(server, workload, out, *extra), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def single(servers, workload, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("single") / "run"
    result = run(servers.get("continuous", 4), workload, out)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def files(run_dir: Path) -> list[str]:
    return sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*"))


def assert_accounted_for_like(run_dir: Path, reference: Path, workload: Path, workers: int) -> pd.DataFrame:
    """The run's tables against the single-process run's and the plan: each request once, offsets held."""
    assert files(run_dir) == files(reference)
    assert (run_dir / "plan.json").read_bytes() == (reference / "plan.json").read_bytes()
    for name, schema in (("records", RECORD_SCHEMA), ("tokens", TOKEN_SCHEMA), ("telemetry", TELEMETRY_SCHEMA)):
        assert pq.read_table(run_dir / f"{name}.parquet").schema.equals(schema, check_metadata=False), name
    rows = pd.read_parquet(run_dir / "records.parquet")
    plan = build_plan(load_spec(workload))
    assert list(rows.request_id) == list(range(len(plan.requests)))
    assert rows.ok.all() and (rows.completion_tokens == rows.planned_output_tokens).all()
    tokens = pd.read_parquet(run_dir / "tokens.parquet")
    assert len(tokens) == rows.completion_tokens.sum()
    assert sorted(tokens.request_id.unique()) == list(rows.request_id)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] and manifest["counts"]["sent"] == manifest["counts"]["ok"] == len(plan.requests)
    # Every request was due at its planned offset from the one start instant, and none left early.
    offsets = rows.scheduled_s.to_numpy() - manifest["started_at"]
    planned = np.array([request.arrival_s for request in plan.requests], dtype=float)
    np.testing.assert_allclose(offsets, planned, atol=1e-6)
    assert (rows.lateness_s >= 0).all() and rows.lateness_s.median() < 0.1
    assert rows.worker.nunique() == workers
    return rows


@pytest.mark.server
def test_two_local_workers_write_the_tables_one_process_writes(servers, workload, single, tmp_path):
    out = tmp_path / "two"
    result = run(servers.get("continuous", 4), workload, out, "--workers", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 workers attached" in result.stderr and "on 2 workers" in result.stderr
    rows = assert_accounted_for_like(out, single, workload, workers=2)
    assert_accounted_for_like(single, single, workload, workers=1)
    # Round robin: request j went to worker j mod 2.
    by_worker = rows.groupby("worker").request_id.apply(lambda ids: sorted(ids % 2)).tolist()
    assert sorted(by_worker) == [[0] * 20, [1] * 20]
    manifest = json.loads((out / "manifest.json").read_text())
    processes = manifest["load_processes"]
    assert [p["role"] for p in processes] == ["master", "worker", "worker"]
    assert sorted(p["name"] for p in processes[1:]) == sorted(rows.worker.unique())
    assert [p["requests"] for p in processes[1:]] == [20, 20]
    assert all(p["clock_offset_s"] == 0.0 for p in processes)  # one host: one clock
    healths = [ClientHealth.model_validate(p["client_health"]) for p in processes]
    assert ClientHealth.model_validate(manifest["client_health"]) == worst_case(healths)
    assert json.loads((single / "manifest.json").read_text())["load_processes"] is None


@pytest.mark.server
def test_naive_waves_hold_across_two_workers(servers, tmp_path):
    path = tmp_path / "burst.yaml"
    path.write_text(WORKLOAD.replace("{kind: poisson, rate: 20}", "{kind: burst}").replace("40", "12", 1))
    out = tmp_path / "naive"
    result = run(servers.get("continuous", 4), path, out, "--workers", "2", "--system", "naive")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(12)) and rows.ok.all()
    assert list(rows.wave) == [0] * 4 + [1] * 4 + [2] * 4 and rows.worker.nunique() == 2
    waves = rows.groupby("wave").agg(first_sent=("sent_s", "min"), last_end=("end_s", "max"))
    assert (waves.first_sent.iloc[1:].to_numpy() >= waves.last_end.iloc[:-1].to_numpy()).all()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.server
def test_workers_attached_from_separate_processes_over_loopback(servers, workload, single, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    master = subprocess.Popen(run_args(servers.get("continuous", 4), workload, tmp_path / "attached", "--workers",
                                       "2", "--master-bind", address), stderr=subprocess.PIPE, text=True)
    workers = [subprocess.Popen([*BATCHBENCH, "worker", "--master", address], stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    try:
        _, master_err = master.communicate(timeout=300)
        worker_errs = [worker.communicate(timeout=60)[1] for worker in workers]
    finally:
        for process in (master, *workers):
            process.kill()
    assert master.returncode == 0, master_err[-2000:]
    assert [worker.returncode for worker in workers] == [0, 0], worker_errs
    assert f"batchbench worker --master {address}" in master_err
    rows = assert_accounted_for_like(tmp_path / "attached", single, workload, workers=2)
    # The rows came from those two processes: the worker column is host:pid.
    assert sorted(int(name.rsplit(":", 1)[1]) for name in rows.worker.unique()) == sorted(w.pid for w in workers)
