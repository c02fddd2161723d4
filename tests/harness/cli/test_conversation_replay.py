"""The shipped conversation trace replayed through `batchbench run` against real vLLM servers: every turn in
order, none sent before its previous turn's answer ended plus its think time, every length exact."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

import workloads

# The trace's first rows: whole chats and the starts of others, a short replay on two cores.
ROWS = 12  # 5 of them later turns (two chats to their third), over the trace's first 10 s
B = 4


def shipped_workload_cut(tmp_path):
    """cpu-trace-conversations, its trace's first ROWS rows (the file read where it ships)."""
    shipped = workloads.builtin_workload_path("cpu-trace-conversations")
    spec = yaml.safe_load(shipped.read_text())
    spec["trace"]["path"] = str(shipped.parent / spec["trace"]["path"])
    path = tmp_path / "conversations.yaml"
    path.write_text(json.dumps({**spec, "num_requests": ROWS}))
    return path


def replay(server, workload, out, system: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--system", system,
         "--endpoint", server.base_url, "--model", "tiny", "--max-num-seqs", str(B), "--out", str(out)],
        capture_output=True, text=True, timeout=600)


def check_turns(out) -> None:
    records = pd.read_parquet(out / "records.parquet").set_index("request_id").sort_index()
    plan = json.loads((out / "plan.json").read_text())["requests"]
    assert len(records) == ROWS and records["ok"].all() and records["length_exact"].all()
    # Exact lengths: the grown prompt as the server counted it, and every output token asked for.
    assert records["prompt_tokens"].tolist() == [request["prompt_tokens"] for request in plan]
    assert records["completion_tokens"].tolist() == [request["output_tokens"] for request in plan]
    assert records["turn"].tolist() == [request["turn"] for request in plan]
    assert records["after"].tolist() == [request.get("after", -1) for request in plan]
    later = records[records["after"] >= 0]
    assert len(later) > 0
    previous = records.loc[later["after"]]
    # The previous turn is the same chat's, one turn earlier.
    assert (previous["session"].to_numpy() == later["session"].to_numpy()).all()
    assert (previous["turn"].to_numpy() + 1 == later["turn"].to_numpy()).all()
    assert later["think_s"].tolist() == pytest.approx([plan[i]["think_s"] for i in later.index])
    # None sent before its previous turn's answer ended plus its think time; due then, to within the few
    # ms between the answer's end and the dispatcher hearing of it.
    answered = previous["end_s"].to_numpy() + later["think_s"].to_numpy()
    assert (later["sent_s"].to_numpy() >= answered).all()
    due = later["scheduled_s"].to_numpy() - answered
    assert (due >= 0).all() and (due < 0.05).all()


@pytest.mark.server
def test_a_conversation_replays_turn_by_turn_on_continuous(servers, tmp_path):
    result = replay(servers.get("continuous", B), shipped_workload_cut(tmp_path), tmp_path / "continuous",
                    "continuous")
    assert result.returncode == 0, result.stderr[-2000:]
    check_turns(tmp_path / "continuous")


@pytest.mark.server
@pytest.mark.ends_pooled_server("switches")
def test_a_conversation_replays_turn_by_turn_on_static(servers, tmp_path):
    # The pool's static server, started once the tests sharing its continuous one are done: the continuous server
    # is not started again after it.
    result = replay(servers.get("static", B), shipped_workload_cut(tmp_path), tmp_path / "static", "static")
    assert result.returncode == 0, result.stderr[-2000:]
    check_turns(tmp_path / "static")


def test_naive_refuses_a_conversation_in_one_line_before_any_server(tmp_path):
    # Nothing listens on the discard port: the refusal comes before the server is asked anything.
    result = replay(SimpleNamespace(base_url="http://127.0.0.1:9"), shipped_workload_cut(tmp_path), tmp_path / "naive",
                    "naive")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "batchbench: error: naive: a conversation cannot be sent in padded waves (a wave could hold a turn and the"
        " turn whose answer it waits for): run it on continuous or static"]
    assert not (tmp_path / "naive").exists()


def test_reproduce_refuses_a_conversation_before_any_server_since_it_runs_naive(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce", "--workloads", "cpu-trace-conversations",
                             "--out", str(out), "--no-history"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "batchbench: error: cpu-trace-conversations: a conversation cannot be sent in naive's padded waves, which"
        " reproduce runs: replay it with `batchbench run --system continuous` and `--system static`"]
    assert not out.exists()
