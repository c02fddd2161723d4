"""A trace replayed through `batchbench run` against a real vLLM server: trace -> plan -> records."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

ROWS = 16
B = 4


def write_trace(tmp_path):
    """A JSONL log in its own layout (milliseconds, a session, prefix hash ids, a tenant) and its workload."""
    rng = np.random.default_rng(11)
    times_ms = np.cumsum(rng.integers(0, 400, ROWS))
    rows = [{"t_ms": int(t), "in": int(rng.integers(8, 40)), "out": int(rng.integers(2, 30)), "conv": f"c{i % 5}",
             "blocks": [int(b) for b in rng.integers(0, 9, 1 + i % 3)], "tenant": "ab"[i % 2]}
            for i, t in enumerate(times_ms)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    columns = {"arrival": "t_ms", "prompt_tokens": "in", "output_tokens": "out", "session": "conv",
               "hash_ids": "blocks", "label": "tenant"}
    spec = {"name": "log", "seed": 1, "trace": {"path": "log.jsonl", "columns": columns, "time_unit": "ms",
                                                 "time_scale": 2}}
    (tmp_path / "log.yaml").write_text(json.dumps(spec))
    return rows


def replay(server, tmp_path, system: str) -> tuple[subprocess.CompletedProcess, pd.DataFrame]:
    out = tmp_path / system
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(tmp_path / "log.yaml"), "--system", system,
         "--endpoint", server.base_url, "--model", "tiny", "--max-num-seqs", str(B), "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result, pd.read_parquet(out / "records.parquet").sort_values("request_id")


@pytest.mark.server
def test_every_row_of_a_trace_is_a_record_with_its_arrival_lengths_and_ids(servers, tmp_path):
    rows = write_trace(tmp_path)
    server = servers.get("continuous", B)
    _, records = replay(server, tmp_path, "continuous")
    assert len(records) == ROWS and records["ok"].all()
    assert records["trace_row"].tolist() == list(range(ROWS))
    assert records["planned_prompt_tokens"].tolist() == [row["in"] for row in rows]
    assert records["completion_tokens"].tolist() == [row["out"] for row in rows]
    assert records["session"].tolist() == [row["conv"] for row in rows]
    assert records["label"].tolist() == [row["tenant"] for row in rows]
    assert [json.loads(ids) for ids in records["hash_ids"]] == [row["blocks"] for row in rows]
    # Each request was due at its row's offset, replayed twice as fast, and sent on time.
    offsets = records["scheduled_s"] - records["scheduled_s"].min()
    expected = (np.array([row["t_ms"] for row in rows]) - rows[0]["t_ms"]) / 2000
    np.testing.assert_allclose(offsets, expected, atol=1e-5)
    assert records["lateness_s"].quantile(0.99) < 0.05

    _, naive = replay(server, tmp_path, "naive")
    # Waves of B in arrival order, each padded to its longest and sent once its last member arrived.
    waves = np.arange(ROWS) // B
    assert naive["wave"].tolist() == waves.tolist()
    longest = pd.Series([row["out"] for row in rows]).groupby(waves).transform("max")
    assert naive["requested_output_tokens"].tolist() == longest.tolist()
    assert naive["trace_row"].tolist() == list(range(ROWS))
    last_arrival = pd.Series(expected).groupby(waves).transform("max").to_numpy()
    # Against the first wave's earliest send (a wave's members go out within a few ms of each other).
    sent = naive["sent_s"].to_numpy()
    assert np.all(sent - sent[waves == 0].min() >= last_arrival - last_arrival[0] - 5e-3)

    # The report on the trace: its answer and trust first, then each system's latency from the trace's arrivals,
    # then the trace's shape.
    report = tmp_path / "report"
    analyzed = subprocess.run([sys.executable, "-m", "harness.cli", "analyze", str(tmp_path / "continuous"),
                               str(tmp_path / "naive"), "--out", str(report)], capture_output=True, text=True,
                              timeout=600)
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    (trace,) = json.loads((report / "summary.json").read_text())["traces"]
    assert (trace["shape"]["requests"], trace["shape"]["source"]) == (ROWS, "log.jsonl")
    assert trace["shape"]["span_s"] == pytest.approx(expected[-1])
    systems = {system["system"]: system for system in trace["systems"]}
    assert set(systems) == {"continuous", "naive"} and systems["continuous"]["e2e_ratio_to_continuous"] is None
    # Naive's rows wait for their wave: from the trace's arrival, its median E2E is longer than continuous's.
    assert systems["naive"]["e2e_ratio_to_continuous"]["point"] > 1
    markdown = (report / "report.md").read_text()
    assert markdown.startswith("# Continuous vs static batching on a trace: the latency gap")
    assert markdown.index("naive's median E2E from arrival is") < markdown.index("- trust: one run per system") < \
        markdown.index("## Latency on the trace: log") < markdown.index("### The trace: log (log.jsonl)") < \
        markdown.index("## Throughput")


@pytest.mark.server
def test_a_trace_whose_first_rows_fill_the_context_replays_clipped_and_says_so(servers, tmp_path):
    # The tiny model's context is 4,096 tokens: the first two rows ask for more, the first alone fills it.
    rows = [{"t_ms": 0, "in": 5000, "out": 40}, {"t_ms": 100, "in": 4090, "out": 30},
            *({"t_ms": 200 + 100 * i, "in": 20 + i, "out": 5 + i} for i in range(6))]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    columns = {"arrival": "t_ms", "prompt_tokens": "in", "output_tokens": "out"}
    spec = {"name": "long", "seed": 1, "trace": {"path": "long.jsonl", "columns": columns, "time_unit": "ms",
                                                  "max_tokens": 4096, "over_limit": "clip"}}
    (tmp_path / "log.yaml").write_text(json.dumps(spec))
    server = servers.get("continuous", B)
    result, records = replay(server, tmp_path, "continuous")
    # Warm-up sent a prompt with room in the context: nothing was refused, every row answered at its clipped length.
    assert len(records) == len(rows) and records["ok"].all()
    assert records["planned_prompt_tokens"].tolist()[:2] == [4095, 4090]
    assert records["completion_tokens"].tolist() == [1, 6, *(5 + i for i in range(6))]
    assert "2 of 8 trace rows were longer than max_tokens 4096 and were clipped to it" in result.stderr
    analyzed = subprocess.run([sys.executable, "-m", "harness.cli", "analyze", str(tmp_path / "continuous"),
                               "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=600)
    assert analyzed.returncode == 0, analyzed.stderr[-2000:]
    (trace,) = json.loads((tmp_path / "report" / "summary.json").read_text())["traces"]
    assert (trace["shape"]["clipped"], trace["shape"]["max_tokens"]) == (2, 4096)
    assert "2 of its 8 rows asked for more than max_tokens 4,096 and were clipped" in (
        tmp_path / "report" / "report.md").read_text()
