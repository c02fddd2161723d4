"""`batchbench reproduce` on the user's clock, against a real vLLM server: a report after the
first repetition that says it is preliminary, and after Ctrl-C a report of the runs that
finished, marked stopped, with the documented exit code."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

# docs/failures.md#exit-codes (harness.cli is not imported here: it gevent-patches the process).
EXIT_INTERRUPTED = 130

# Long enough per run (seconds at B = 4) that Ctrl-C lands inside the second repetition.
WORKLOAD = """\
name: spread-for-reproduce
description: spread outputs sent at once, a few seconds per run at B = 4
seed: 11
num_requests: 24
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: choice, values: [16, 64, 256], order: cycle}
arrival: {kind: burst}
"""
# What the page shows first, as Chromium renders it.
FIRST_LINES = "{title: document.title, lead: document.querySelector('p').textContent}"


def wait_for(path, process, timeout_s=300.0):
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, f"{path} did not appear in {timeout_s:.0f} s"
        time.sleep(0.2)


def stage_of(out):
    return json.loads((out / "summary.json").read_text())["stage"]


@pytest.mark.server
@pytest.mark.browser
def test_a_preliminary_report_after_repetition_one_and_a_stopped_one_after_ctrl_c(
    servers, tmp_path, probe_in_chromium
):
    server = servers.get("continuous", 4)
    workload = tmp_path / "spread.yaml"
    workload.write_text(WORKLOAD)
    out = tmp_path / "report"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", "--workloads", str(workload), "--repetitions", "3",
         "--endpoint", server.base_url, "--static-endpoint", server.base_url, "--model", "tiny",
         "--max-num-seqs", "4", "--out", str(out), "--no-history"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(out / "summary.json", process)
        assert stage_of(out) == "PRELIMINARY: 1 of 3 repetitions; the next repetition rewrites this report"
        # The page as a user opens it now, while the second repetition runs.
        seen = tmp_path / "seen"
        shutil.copytree(out, seen, ignore=shutil.ignore_patterns("runs", "servers"))
        page = probe_in_chromium(seen / "report.html", FIRST_LINES)
        assert page["title"].startswith("PRELIMINARY: 1 of 3 repetitions")
        assert page["lead"].startswith("PRELIMINARY: 1 of 3 repetitions")
        assert process.poll() is None, "the job ended before Ctrl-C"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_INTERRUPTED, stderr[-3000:]
    assert stdout.strip() == str(out / "report.html")
    stage = stage_of(out)
    assert stage.startswith("STOPPED: stopped by Ctrl-C after ") and " of 9 runs" in stage
    finished = int(stage.split(" after ", 1)[1].split(" of ", 1)[0])
    assert 3 <= finished < 9
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["runs"]) == 3 and not summary["partial"]  # the cells' median runs; no failed run kept
    assert "Traceback" not in stderr
    assert f"exit {EXIT_INTERRUPTED}" in stderr.splitlines()[-1]
