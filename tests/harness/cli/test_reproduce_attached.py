"""`batchbench reproduce --endpoint`, a server the harness did not launch: the server's own continuous batching,
static batching kept by the client and naive's padded waves, the headline continuous over client-static and over
naive, every figure marked as the client's; the context the user states checked against the one the server states."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.server

# Two spread levels, a few waves of B = 4 each: seconds per run.
WORKLOADS = {
    "attached-short": "output_tokens: {kind: choice, values: [8, 16], order: cycle}",
    "attached-spread": "output_tokens: {kind: choice, values: [8, 64], order: cycle}",
}
SHAPE = """\
name: {name}
seed: 3
num_requests: 8
prompt_tokens: {{kind: fixed, value: 16}}
{outputs}
arrival: {{kind: burst}}
"""
CLIENT_ONLY = "engine step log: none (a server batchbench did not launch): every figure is the client's"


def reproduce(url: str, tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, object]:
    paths = []
    for name, outputs in WORKLOADS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(SHAPE.format(name=name, outputs=outputs))
        paths.append(str(path))
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "--workloads", ",".join(paths), "--quick",
         "--endpoint", url, "--model", "tiny", "--max-num-seqs", "4", "--out", str(out), "--no-history", *extra],
        capture_output=True, text=True, timeout=600,
    )
    return result, out


def test_an_attached_server_is_measured_on_three_systems_and_its_figures_are_the_clients(servers, tmp_path):
    server = servers.get("continuous", 4)
    result, out = reproduce(server.base_url, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    measured = {(cell["system"], cell["level"]) for cell in summary["cells"]}
    assert measured == {(system, level) for system in ("continuous", "client-static", "naive")
                        for level in WORKLOADS}
    assert [sorted(row["ratios"]) for row in summary["headline"]] == [
        ["continuous/client-static", "continuous/naive"]] * len(WORKLOADS)
    # No engine log: no run is re-priced at one machine speed.
    assert all(not row["ratios_at_one_speed"] for row in summary["headline"])
    report = (out / "report.md").read_text()
    assert CLIENT_ONLY in report
    assert "Static batching is kept by the client (client-static)" in report
    # Each client-static run: waves of the B the user stated, against a server the harness did not launch.
    for level in WORKLOADS:
        manifest = json.loads((out / "runs" / f"client-static-{level}" / "manifest.json").read_text())
        assert manifest["batch_size"] == 4 and manifest["server"] is None


def test_a_context_the_server_contradicts_is_refused_before_any_run(servers, tmp_path):
    server = servers.get("continuous", 4)
    result, out = reproduce(server.base_url, tmp_path, "--max-model-len", "100000")
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "--max-model-len 100000 does not match the server at" in last and "which states max_model_len" in last
    assert not (out / "runs").exists()
