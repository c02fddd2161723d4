"""`batchbench gpu-check` refuses bad sizes and outputs in one line, exit 2, before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("args", "fragment"), [
    (["--pairs", "2"], "--pairs: Input should be greater than or equal to 3 (got 2)"),
    (["--attempts", "0"], "--attempts: Input should be greater than or equal to 1 (got 0)"),
    (["--max-num-seqs", "-4"], "--max-num-seqs: Input should be greater than or equal to 1 (got -4)"),
    (["--requests", "many"], "argument --requests/N: invalid int value"),
])
def test_a_bad_size_is_one_line_and_nothing_is_written(tmp_path, args, fragment):
    out = tmp_path / "verdict"
    result = subprocess.run([sys.executable, "-m", "harness.cli", "gpu-check", "--out", str(out), *args],
                            capture_output=True, text=True, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and fragment.split("/")[0] in lines[0], result.stderr
    assert not out.exists()


def test_an_output_that_is_a_file_or_not_empty_is_refused(tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "old").write_text("x")
    for out, fragment in ((tmp_path / "taken" / "old", "is a file"), (taken, "is not empty")):
        result = subprocess.run([sys.executable, "-m", "harness.cli", "gpu-check", "--out", str(out)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and fragment in result.stderr and len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in taken.iterdir()) == ["old"]
