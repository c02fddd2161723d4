"""The probe against a real vLLM server: the step cost it fits estimates the next run, a different plan."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

import harness

ROOT = Path(harness.__file__).resolve().parent.parent

# In a process of its own: the probe runs the load driver, which gevent-patches its process.
PROBE_THEN_RUN = """
import json, sys, time
from pathlib import Path

from harness.budget import plan_job
from harness.driver.endpoint import load_tokenizer, probe_endpoint
from harness.probe import probe_machine
from harness.rundir.reader import load_run
from harness.sweep import SweepCell, SweepTarget, iter_runs
from harness.workload import load_spec

url, server, out = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
info = probe_endpoint(url, {}, None)
target = SweepTarget(info, load_tokenizer(None, info), 4, server)
spec = load_spec("cpu-anyscale-cap128").model_copy(update={"num_requests": 40})
probe = probe_machine({"continuous": target}, [spec], out / "probe", 4)
estimate = plan_job([spec], ["continuous"], 1, probe.machine).runs[0]
(run,) = iter_runs([SweepCell("continuous", spec, target)], out / "runs", 1)
print(json.dumps({"overhead_s": probe.machine.run_overhead_s, "estimated_s": estimate.seconds,
                  "measured_s": run.seconds, "probe_s": probe.seconds,
                  "probe_runs": sorted(path.name for path in (out / "probe").iterdir())}))
"""


@pytest.mark.server
def test_the_probe_s_fit_estimates_the_job_s_next_run_within_fifteen_percent(servers, tmp_path):
    server = servers.get("continuous", 4)
    result = subprocess.run(
        [sys.executable, "-c", PROBE_THEN_RUN, server.base_url, json.dumps(asdict(server.info)), str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    # The probe bursts the widest spread it is given (here the only one), apart from the job's runs.
    assert figures["probe_runs"] == ["continuous-probe-cpu-anyscale-cap128"]
    assert 0.0 <= figures["overhead_s"] < 5.0 and figures["probe_s"] > 0.0
    assert figures["estimated_s"] == pytest.approx(figures["measured_s"], rel=0.15)


def test_the_probe_s_burst_interleaves_the_first_requests_of_every_workload():
    from harness.probe import PROBE_REQUESTS, mixed_probe
    from harness.workload import build_plan, load_specs

    specs = load_specs(["cpu-anyscale-cap32", "cpu-anyscale-cap1536"])
    firsts = [build_plan(spec).requests for spec in specs]
    probe = build_plan(mixed_probe(specs))
    assert probe.arrival == "burst" and len(probe.requests) == PROBE_REQUESTS
    expected = [firsts[i % 2][i // 2] for i in range(PROBE_REQUESTS)]
    assert [(r.prompt_tokens, r.output_tokens) for r in probe.requests] == [
        (r.prompt_tokens, r.output_tokens) for r in expected]
    # The narrow spread's outputs stay under its cap; the wide one's reach past it.
    assert max(r.output_tokens for r in probe.requests[0::2]) <= 32 < max(r.output_tokens for r in probe.requests[1::2])
