"""The jobs layer: importable as a library without the load driver, and what every job shares."""

from __future__ import annotations

import re
import subprocess
import sys

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
