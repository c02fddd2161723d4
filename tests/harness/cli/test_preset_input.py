"""`--preset` on `reproduce` and `predict` through the real command line: the preset's prediction, and each
bad combination refused in one line with exit 2 before any server starts.

Each call is a child process: importing harness.cli gevent-patches the process it runs in.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def batchbench(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_predict_for_the_preset_is_the_published_setup_with_per_system_b():
    result = batchbench("predict", "--preset", "anyscale-2023")
    assert result.returncode == 0, result.stderr
    # The first table: workload, B, continuous tok/s, published, ...
    rows = [line for line in result.stdout.split("### ")[0].splitlines() if line.startswith("| anyscale-cap")]
    # Static and naive at the published B per cap; continuous at the engine's own (256 on paper).
    assert [row.split(" | ")[1] for row in rows] == ["16", "12", "8", "4"]
    assert "continuous runs up to 256" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["reproduce", "--preset", "anyscale-2023", "--max-num-seqs", "8"],
         "--max-num-seqs 8: below anyscale-2023's naive B of 16 at anyscale-cap32"),
        (["reproduce", "--preset", "anyscale-2023", "--workloads", "cpu-anyscale-cap32"],
         "--workloads cpu-anyscale-cap32: anyscale-2023 sets static and naive B"),
        (["reproduce", "--preset", "anyscale-2023", "--budget-min", "5"],
         "--preset anyscale-2023: --budget-min sizes plans from a probe of one static server"),
        (["reproduce", "--preset", "anyscale-2023", "--endpoint", "http://127.0.0.1:9"],
         "--preset anyscale-2023: static runs at a B per workload, a server launched here for each"),
        (["reproduce", "--preset", "anyscale-2023", "--transformers"],
         "--preset anyscale-2023: the published experiment's three systems"),
        (["reproduce", "--preset", "anyscale-2023", "--quick", "--full-size"],
         "--full-size and --quick: choose one way"),
        (["reproduce", "--preset", "anyscale-2022"], "invalid choice: 'anyscale-2022'"),
        (["predict", "--preset", "anyscale-2022"], "invalid choice: 'anyscale-2022'"),
        (["predict", "--gpu", "h100"], "--model, --workloads: required without --preset"),
    ],
)
def test_bad_preset_input_is_one_line_and_exit_2(args, fragment, tmp_path):
    result = batchbench(*args, "--out", str(tmp_path / "o"), cwd=tmp_path) if args[0] == "reproduce" else (
        batchbench(*args))
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3  # argparse's own adds its usage line
