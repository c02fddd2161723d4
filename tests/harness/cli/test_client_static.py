"""client-static against a real vLLM: waves formed by the static rule, sent one after the other, unpadded."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

B = 4
WAIT_S = 0.4
# Four at once (a full wave), then two and three that each wait out the batch wait.
ARRIVALS_MS = [0, 0, 0, 0, 2000, 2100, 5000, 5050, 5100]
OUTPUTS = [4, 30, 8, 12, 20, 6, 9, 25, 3]


@pytest.mark.server
def test_waves_form_by_the_static_rule_and_each_waits_for_the_last(servers, tmp_path):
    rows = [{"timestamp": at, "input_length": 24, "output_length": out} for at, out in zip(ARRIVALS_MS, OUTPUTS,
                                                                                           strict=True)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    columns = {"arrival": "timestamp", "prompt_tokens": "input_length", "output_tokens": "output_length"}
    (tmp_path / "t.yaml").write_text(json.dumps({"name": "t", "seed": 1, "trace": {
        "path": "t.jsonl", "columns": columns, "time_unit": "ms"}}))
    server = servers.get("continuous", B)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(tmp_path / "t.yaml"), "--system",
         "client-static", "--endpoint", server.base_url, "--model", "tiny", "--max-num-seqs", str(B),
         "--batch-wait-s", str(WAIT_S), "--out", str(out), "--no-history"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    records = pd.read_parquet(out / "records.parquet").sort_values("request_id")
    assert records["ok"].all() and records["length_exact"].all()
    # Unpadded: each asks for its own length.
    assert records["requested_output_tokens"].tolist() == OUTPUTS
    assert records["wave"].tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2]
    sent = records.groupby("wave")["sent_s"].agg(["min", "max"])
    ended = records.groupby("wave")["end_s"].max()
    assert (sent["max"] - sent["min"] < 0.05).all()  # a wave goes out together
    assert sent.loc[1, "min"] >= ended[0] and sent.loc[2, "min"] >= ended[1]  # after the previous wave ended
    start = records["scheduled_s"].min()
    # Each later wave is short of B: it goes once its oldest member (2.0 s, 5.0 s) has waited the batch wait.
    assert records.loc[records["wave"] == 1, "scheduled_s"].iloc[0] - start == pytest.approx(2.0 + WAIT_S, abs=0.01)
    assert records.loc[records["wave"] == 2, "scheduled_s"].iloc[0] - start == pytest.approx(5.0 + WAIT_S, abs=0.01)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["system"], manifest["client_batch_wait_s"]) == ("client-static", WAIT_S)
