"""A sweep's progress lines: each cell's header, its run's lines indented under it, and the
job's note on the header and on the lines that report progress."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import harness

ROOT = Path(harness.__file__).resolve().parent.parent

# In a process of its own: the sweep imports the runner, and with it Locust, which
# patches the process it is imported into for gevent.
SWEEP = """
import sys
from pathlib import Path

from harness.sweep import runs as sweep
from harness.cli.progress import show_progress
from harness.driver.endpoint import EndpointInfo
from harness.sweep.servers import SweepTarget
from harness.workload import load_spec

show_progress()
sweep.warm_up = lambda *args, **kwargs: None

def execute(request):
    sweep.run_logger.info(f"building 12 prompts for {request.out_dir.name}")
    if len(sys.argv) > 2:
        sweep.run_logger.info("  3/12 done, 40 tok/s, 0 errors, 2 s")


sweep.execute = execute
target = SweepTarget(EndpointInfo("http://127.0.0.1:9", "tiny", None, None), None, 4)
spec = load_spec("cpu-anyscale-cap32")
cells = [sweep.SweepCell("continuous", spec, target), sweep.SweepCell("naive", spec, target)]
if len(sys.argv) > 2:
    made = []
    for run in sweep.iter_runs(cells, Path(sys.argv[1]), repetitions=2, note=lambda: f"run {len(made) + 1} of 4"):
        made.append(run.path)
else:
    sweep.run_cells(cells, Path(sys.argv[1]), repetitions=2)
sweep.run_logger.info("after the sweep")
"""


def sweep_lines(tmp_path, *extra):
    result = subprocess.run(
        [sys.executable, "-c", SWEEP, str(tmp_path), *extra], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stderr.splitlines()


def test_each_run_s_lines_are_indented_under_its_cell_header(tmp_path):
    assert sweep_lines(tmp_path) == [
        "[continuous] cpu-anyscale-cap32-r1",
        "    building 12 prompts for continuous-cpu-anyscale-cap32-r1",
        "[naive] cpu-anyscale-cap32-r1",
        "    building 12 prompts for naive-cpu-anyscale-cap32-r1",
        "[continuous] cpu-anyscale-cap32-r2",
        "    building 12 prompts for continuous-cpu-anyscale-cap32-r2",
        "[naive] cpu-anyscale-cap32-r2",
        "    building 12 prompts for naive-cpu-anyscale-cap32-r2",
        "after the sweep",
    ]


def test_the_job_s_note_goes_on_each_header_and_each_progress_line_only(tmp_path):
    lines = sweep_lines(tmp_path, "with a note")
    assert lines[:6] == [
        "[continuous] cpu-anyscale-cap32-r1 (run 1 of 4)",
        "    building 12 prompts for continuous-cpu-anyscale-cap32-r1",
        "      3/12 done, 40 tok/s, 0 errors, 2 s | run 1 of 4",
        "[naive] cpu-anyscale-cap32-r1 (run 2 of 4)",
        "    building 12 prompts for naive-cpu-anyscale-cap32-r1",
        "      3/12 done, 40 tok/s, 0 errors, 2 s | run 2 of 4",
    ]
    assert lines[-1] == "after the sweep"
