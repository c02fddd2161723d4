"""Shared prefixes against a real vLLM with its prefix cache on: the cache finds what the trace reuses, run by run."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from launchers import ServerSpec, start

# vLLM's CPU build caches whole blocks of 128 tokens: a shared prefix must span some.
BLOCK = 128
GROUPS = 3
ROWS = 12
PROMPT = 400


def write_workload(tmp_path):
    """Rows 400 ms apart (each prefilled before the next comes), each opening with one of three
    2-block prefixes, then two blocks of its own: 9 of 12 rows reuse 256 of their 400 tokens."""
    rows = [{"timestamp": 400 * i, "input_length": PROMPT, "output_length": 4,
             "hash_ids": [2 * (i % GROUPS), 2 * (i % GROUPS) + 1, 100 + 2 * i, 101 + 2 * i]} for i in range(ROWS)]
    (tmp_path / "agent.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    spec = {"name": "agent", "seed": 2, "prefix_cache": True,
            "trace": {"path": "agent.jsonl", "preset": "mooncake", "block_tokens": BLOCK}}
    (tmp_path / "agent.yaml").write_text(json.dumps(spec))
    return (ROWS - GROUPS) * 2 * BLOCK / (ROWS * PROMPT)


@pytest.mark.server
def test_each_run_finds_its_own_shared_prefixes_cached_and_no_other_runs(tmp_path):
    planned = write_workload(tmp_path)
    # Eager: a start 8 s sooner without compiling, for two runs of twelve 4-token answers.
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=4,
                      vllm_args=("--enable-prefix-caching", "--enforce-eager"))
    handle = start(spec, log_dir=tmp_path / "server")
    try:
        for name in ("first", "second"):
            result = subprocess.run(
                [sys.executable, "-m", "harness.cli", "run", "--workload", str(tmp_path / "agent.yaml"),
                 "--system", "continuous", "--endpoint", handle.base_url, "--model", "tiny", "--max-num-seqs", "4",
                 "--out", str(tmp_path / name), "--no-history"], capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, result.stderr[-2000:]
            # Outside vLLM's dev mode its /server_info is not served: B is the one given.
            assert f"B not stated by the server at {handle.base_url}: taken from --max-num-seqs (4)" in result.stderr
    finally:
        handle.stop()
    report = tmp_path / "report"
    analyzed = subprocess.run([sys.executable, "-m", "harness.cli", "analyze", str(tmp_path / "first"),
                               str(tmp_path / "second"), "--out", str(report)], capture_output=True, text=True,
                              timeout=600)
    assert analyzed.returncode in (0, 3), analyzed.stderr[-2000:]
    (use,) = json.loads((report / "summary.json").read_text())["prefix_cache"]
    assert use["planned_reuse"] == pytest.approx(planned, abs=1e-4) and use["runs"] == 2
    # vLLM's own counters over each run: the trace's reuse, and the second run found none of the
    # first's blocks (each run's cache_salt), which would have put it near 100%.
    assert use["counters_hit_rate"] == pytest.approx(planned, abs=0.05)
    for name in ("first", "second"):
        telemetry = pd.read_parquet(tmp_path / name / "telemetry.parquet").sort_values("t")
        queries, hits = (telemetry[column].iloc[-1] - telemetry[column].iloc[0]
                         for column in ("prefix_cache_queries_total", "prefix_cache_hits_total"))
        assert hits / queries == pytest.approx(planned, abs=0.05), name
    assert "## Prefix cache" in (report / "report.md").read_text()
