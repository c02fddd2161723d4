"""However a run ends, its live load is stopped: no client, user or sampler left running.

Against a server that takes connections and never answers, so requests are in flight
when the run ends. In a process of its own (runner_scenario.py): Locust patches the
process it is imported into.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

import harness

SCENARIO = Path(__file__).with_name("runner_scenario.py")
# The script's own directory heads its sys.path: point it at the harness under test.
ROOT = Path(harness.__file__).resolve().parent.parent
STOPPED = {"client_closed": True, "runner_state": "stopped", "monitor_stopped": True, "still_running": []}


def run_scenario(name: str, out: Path) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(SCENARIO), name, str(out)], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout), result.stderr


def test_an_unexpected_error_mid_run_still_stops_every_part_of_the_load(tmp_path):
    seen, _ = run_scenario("error", tmp_path / "run")
    assert seen == {"raised": "RuntimeError", **STOPPED}


def test_an_interrupted_run_stops_the_load_answers_for_every_request_and_raises_again(tmp_path):
    out = tmp_path / "run"
    seen, stderr = run_scenario("interrupt", out)
    assert seen == {"raised": "KeyboardInterrupt", **STOPPED}
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["complete"]
    # 4 users had sent their request when Ctrl-C came; the other 8 were never sent.
    rows = pd.read_parquet(out / "records.parquet")
    assert list(rows.request_id) == list(range(12))
    assert list(rows.error_kind) == ["lost"] * 4 + ["not_sent"] * 8
    assert manifest["counts"]["unanswered"] == 12 and manifest["counts"]["sent"] == 4
    # The progress lines, one each, as the CLI prints them.
    lines = stderr.splitlines()
    assert "building 12 prompts of exact token length" in lines
    assert "continuous: 12 requests, 4 users, B=4" in lines
    assert f"interrupted: kept 0 finished requests in {out} (marked incomplete)" in lines
    # GPU telemetry: one line in the log and the manifest, and gpu.parquet only where a GPU was read.
    gpu = manifest["gpu_telemetry"]
    assert gpu["note"] in lines
    assert (out / "gpu.parquet").exists() == bool(gpu["devices"])
    if not Path("/proc/driver/nvidia").exists():
        assert gpu["note"].startswith("no GPU telemetry: ") and gpu["devices"] == []
