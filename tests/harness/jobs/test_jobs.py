"""The jobs layer: importable as a library without the load driver, and what every job shares."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from harness.driver.backends import SGLANG, TRTLLM, VLLM, Backend
from harness.jobs.run import RunJob, _backend
from harness.jobs.stages import Interruption, default_out

IMPORT_JOBS = """
import sys
import harness.jobs.rate_sweep, harness.jobs.reproduce
from gevent import monkey
print(monkey.is_module_patched("socket"), "locust" in sys.modules, "harness.driver.runner" in sys.modules)
"""


def test_importing_a_job_patches_nothing_and_loads_no_load_driver():
    # A child: this process must stay unpatched whatever the import does (tests/conftest.py).
    result = subprocess.run([sys.executable, "-c", IMPORT_JOBS], capture_output=True, text=True, timeout=120,
                            check=True)
    assert result.stdout.split() == ["False", "False", "False"]


def test_ctrl_c_ends_the_loop_not_the_job_and_says_how_far_it_got():
    interruption, finished = Interruption(), []
    with interruption.catch(lambda: f"stopped by Ctrl-C after {len(finished)} of 3 runs"):
        finished.append("run-1")
        raise KeyboardInterrupt
    assert interruption.stopped == "stopped by Ctrl-C after 1 of 3 runs"
    untouched = Interruption()
    with untouched.catch(lambda: "never"):
        finished.append("run-2")
    assert untouched.stopped is None


def test_a_report_goes_under_reports_named_by_its_kind_date_and_host():
    assert re.fullmatch(r"reports/rates-\d{8}-\d{6}-.+", str(default_out("rates-")))
    assert re.fullmatch(r"reports/\d{8}-\d{6}-.+", str(default_out()))


def test_a_run_talks_to_its_kind_of_server_as_that_kind_talks_on_the_workloads_endpoint():
    """SGLang streams token ids on completions only: a chat workload gets its re-tokenising variant."""
    def backend(name: str, endpoint: str) -> Backend:
        return _backend(RunJob(workload="w", out=Path("runs/x"), endpoint="http://127.0.0.1:8000", backend=name),
                        endpoint)

    assert backend("sglang", "completions") is SGLANG and SGLANG.asks_token_ids
    chat = backend("sglang", "chat")
    assert chat.name == "sglang" and chat.retokenizes and not chat.asks_token_ids and chat.forces_length
    assert backend("vllm", "chat") is VLLM and backend("trtllm", "chat") is TRTLLM
