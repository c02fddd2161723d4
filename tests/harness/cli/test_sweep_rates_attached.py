"""`batchbench sweep-rates --endpoint`, a server the harness did not launch: continuous (the server's own) and static
batching kept by the client, each at the offered rate; every figure the client's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.server

WORKLOAD = """\
name: attached-rates
seed: 5
num_requests: 8
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [8, 32], order: cycle}
arrival: {kind: burst}
"""


def test_a_sweep_of_an_attached_server_runs_client_static_at_each_rate_and_says_every_figure_is_the_client_s(
        servers, tmp_path):
    server = servers.get("continuous", 4)
    workload = tmp_path / "attached-rates.yaml"
    workload.write_text(WORKLOAD)
    out = tmp_path / "rates"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "sweep-rates", "--workload", str(workload), "--endpoint",
         server.base_url, "--model", "tiny", "--max-num-seqs", "4", "--rates", "3", "--warmup-s", "1",
         "--measure-s", "3", "--saturation-requests", "8", "--extra-rates", "0", "--refine-runs", "0",
         "--batch-wait-s", "0.5", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["systems"]) == ["client-static", "continuous"]
    assert [len(summary["systems"][system]["points"]) for system in ("continuous", "client-static")] == [1, 1]
    assert summary["engine_steps"] is False and summary["static_batch_wait_s"] == 0.5
    report = (out / "report.md").read_text()
    assert "static batching kept by the client (client-static" in report and "every figure is the client's" in report
    # Client-static's runs: waves of the B stated, the stated batch wait kept by the client, no server launched.
    runs = sorted(path.name for path in (out / "runs").iterdir())
    assert len(runs) == 4 and sum(name.startswith("client-static") for name in runs) == 2
    for name in runs:
        manifest = json.loads((out / "runs" / name / "manifest.json").read_text())
        assert manifest["server"] is None and manifest["batch_size"] == 4
        if name.startswith("client-static"):
            assert manifest["client_batch_wait_s"] == 0.5
