"""./reproduce, the README's main command: batchbench's own exit code, and one line saying what it means.

The script runs in a copy of the repository's root holding a stand-in `batchbench`
that exits with a given code, so no server starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = '#!/bin/sh\necho "batchbench $*"\nexit "$EXIT_CODE"\n'


@pytest.fixture
def checkout(tmp_path):
    shutil.copy2(ROOT / "reproduce", tmp_path / "reproduce")
    # The real reproduce target; a set-up that has nothing to do.
    target = (ROOT / "Makefile").read_text().split("\nreproduce:\n", 1)[1].split("\n\n", 1)[0]
    (tmp_path / "Makefile").write_text(f".PHONY: setup reproduce\nsetup:\n\t@true\nreproduce:\n{target}\n")
    stand_in = tmp_path / ".venv" / "bin" / "batchbench"
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    return tmp_path


def run(command, checkout, code):
    env = {key: value for key, value in os.environ.items() if not key.startswith("MAKE")}
    return subprocess.run(command, cwd=checkout, env={**env, "EXIT_CODE": str(code)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("code", "meaning"), [
    (0, "the smoke run's report is written and every request completed"),
    (1, "a run or a server failed"),
    (2, "bad input"),
    (3, "a headline ratio is UNSTABLE"),
    (130, "interrupted: the report of the runs that finished, if any, is written and marked STOPPED"),
])
def test_the_script_exits_with_batchbench_s_code_and_says_what_it_means(checkout, code, meaning):
    result = run(["./reproduce", "--quick"], checkout, code)
    assert result.returncode == code
    assert result.stdout == "batchbench reproduce --quick\n"
    (last,) = result.stderr.splitlines()[-1:]
    assert last.startswith(f"batchbench reproduce exited {code}: ") and meaning in last


def test_a_measurement_s_exit_0_says_no_ratio_is_unstable(checkout):
    result = run(["./reproduce"], checkout, 0)
    assert result.returncode == 0
    assert result.stderr.splitlines()[-1] == (
        "batchbench reproduce exited 0: the report is written and no headline ratio is UNSTABLE (each STABLE, or NOISY:"
        " read its interval)")


def test_make_reproduce_says_the_meaning_though_make_exits_2(checkout):
    result = run(["make", "reproduce"], checkout, 3)
    assert result.returncode == 2
    assert ("batchbench reproduce exited 3: the report is written, and a headline ratio is UNSTABLE: its line under"
            " the headline says why (make reports it as its own exit 2; ./reproduce keeps the code)") in result.stderr
