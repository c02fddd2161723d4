"""The client-bound warning, end to end: the real CLI drives the calibration endpoint (no vLLM).

Past its ceiling (the endpoint streams as fast as it can to 64 streams) the client must
say "client-bound" at the end of `run`, and `analyze` must say so in the report and in
summary.json; at low load (4 paced streams) it must not. Each run lasts a few seconds,
but loads both cores: run these under `flock /tmp/batchbench-heavy.lock`.

Both verdicts come from the real client's CPU share and loop lag on this machine's
clock, so these two tests are marked `timing`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.calibration.__main__ import READY_LINE
from harness.rundir.manifest import RunManifest
from harness.rundir.records import MANIFEST_FILE
from launchers import resolve_model

FAST = "{kind: closed, users: 64}", 64, 1000
# 4 users, 10 tokens 200 ms apart: two seconds a request, two rounds. At a 200 ms
# inter-token time the lag limit (5%) is 10 ms, which a loaded machine's wake-ups stay under.
SLOW = "{kind: closed, users: 4}", 8, 10


@contextmanager
def calibration_endpoint(step_interval_s: float) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "calibration-endpoint", "--step-interval-s", str(step_interval_s),
         "--tokenizer", str(resolve_model("tiny").path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(READY_LINE), line
        yield line.removeprefix(READY_LINE).strip()
    finally:
        process.terminate()
        process.wait(10)


def batchbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300)


def run_and_analyze(tmp_path: Path, step_interval_s: float, shape: tuple[str, int, int]) -> tuple[str, Path]:
    arrival, requests, tokens = shape
    spec = tmp_path / "load.yaml"
    spec.write_text(f"name: load\nseed: 0\nnum_requests: {requests}\nendpoint: completions\n"
                    f"prompt_tokens: {{kind: fixed, value: 16}}\noutput_tokens: {{kind: fixed, value: {tokens}}}\n"
                    f"arrival: {arrival}\n")
    with calibration_endpoint(step_interval_s) as url:
        run = batchbench("run", "--workload", str(spec), "--endpoint", url, "--out", str(tmp_path / "run"),
                         "--no-history", "--no-warmup")
    assert run.returncode == 0, run.stderr[-2000:]
    report = batchbench("analyze", str(tmp_path / "run"), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    return run.stderr, tmp_path / "report"


@pytest.mark.timing
def test_past_its_ceiling_the_client_says_client_bound_and_suggests_workers(tmp_path):
    """Real time: the client must be the bottleneck, which holds while the endpoint gets its share of the CPU."""
    stderr, report = run_and_analyze(tmp_path, 0.0, FAST)
    warnings = [line for line in stderr.splitlines() if line.startswith("batchbench: warning: client-bound")]
    assert warnings, stderr[-2000:]
    assert all("--workers N" in line for line in warnings)
    summary = json.loads((report / "summary.json").read_text())
    assert summary["client_bound"][0]["run"] == "run"
    assert summary["cells"][0]["runs"][0]["client_bound"] is True
    text = (report / "report.md").read_text()
    assert "CLIENT-BOUND" in text and "`--workers N`" in text
    # A run against the calibration endpoint is marked as such, first.
    assert "CALIBRATION RUNS (run)" in text
    manifest = RunManifest.model_validate_json((tmp_path / "run" / MANIFEST_FILE).read_text())
    assert manifest.server is not None and manifest.server.calibration_only is True


@pytest.mark.timing
def test_at_low_load_the_client_is_not_called_client_bound(tmp_path):
    """Real time: the real client's median loop lag must stay under 5% of a 200 ms inter-token time."""
    stderr, report = run_and_analyze(tmp_path, 0.2, SLOW)
    assert "client-bound" not in stderr
    summary = json.loads((report / "summary.json").read_text())
    assert summary["client_bound"] == []
    checks = summary["cells"][0]["runs"][0]["checks"]
    # Both client-bound checks were made, and passed.
    assert checks["client CPU share"]["passed"] and checks["client loop lag vs ITL"]["passed"]
    assert "CLIENT-BOUND" not in (report / "report.md").read_text()


@pytest.mark.parametrize("flag", [["--port", "70000"], ["--step-interval-s", "-1"], ["--tokenizer", "/no/such"]])
def test_bad_endpoint_options_are_one_line_and_exit_2(flag):
    result = batchbench("calibration-endpoint", *flag)
    assert result.returncode == 2
    assert result.stderr.startswith("batchbench: error: --") and len(result.stderr.strip().splitlines()) == 1
