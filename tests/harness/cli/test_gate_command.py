"""`batchbench gate` on result directories: exit 0 pass, 1 regression, 3 inconclusive, 2 bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.paper.simulate import InterpolatedStepCost

# 3 s steps: the 8 steps of static at cap 4, B=2 last 24 s, past the 20 s a stable run needs.
STEP_S = [3.0, 3.03, 2.97, 3.01]


def result_dir(run_dirs, root: Path, name: str, slowdown: float = 0.0, runs: int = 4) -> Path:
    """A sweep directory of `runs` static runs at cap 4, each step `slowdown` slower."""
    for i, step in enumerate(STEP_S[:runs]):
        model = InterpolatedStepCost.from_points({1: step / (1 - slowdown)})
        run_dirs.write_run(root / name / "runs", f"static-cap4-r{i + 1}", "static", run_dirs.cap_workload(4),
                           run_dirs.OUTPUTS[4], 2, model)
    return root / name


def gate(*args, history: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "gate", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env={"BATCHBENCH_HISTORY": str(history), "PATH": "/usr/bin:/bin"})


@pytest.fixture(scope="module")
def results(tmp_path_factory, synthetic_runs):
    root = tmp_path_factory.mktemp("results")
    return {name: result_dir(synthetic_runs, root, name, slowdown) for name, slowdown in
            (("baseline", 0.0), ("same", 0.0), ("slower", 0.12))} | {
        "short": result_dir(synthetic_runs, root, "short", runs=2)}


def test_the_same_figures_pass_and_a_twelve_percent_drop_is_a_regression(results, tmp_path):
    same = gate(results["same"], "--baseline", results["baseline"], history=tmp_path / "h.sqlite")
    assert same.returncode == 0, same.stderr
    assert "PASS" in same.stdout and same.stdout.rstrip().endswith("-> exit 0")
    junit, summary = tmp_path / "gate.xml", tmp_path / "gate.json"
    slower = gate(results["slower"], "--baseline", results["baseline"], "--junit-xml", junit, "--json", summary,
                  history=tmp_path / "h.sqlite")
    assert slower.returncode == 1, slower.stderr
    assert "REGRESSION" in slower.stdout
    assert ET.parse(junit).getroot().get("failures") == "1"
    document = json.loads(summary.read_text())
    assert document["outcome"] == "regression" and document["configurations"][0]["metric"] == "total_tok_s"
    assert abs(document["configurations"][0]["ratio"]["median"] - 0.88) < 0.01


def test_too_few_repetitions_and_an_empty_history_are_inconclusive(results, tmp_path):
    short = gate(results["short"], "--baseline", results["baseline"], history=tmp_path / "h.sqlite")
    assert short.returncode == 3 and "too few repetitions" in short.stdout
    empty = gate(results["same"], history=tmp_path / "h.sqlite")
    assert empty.returncode == 3 and "no baseline repetitions of this configuration" in empty.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "not a directory: nope"),
        (["{same}", "--threshold", "1.5"], "--threshold: Input should be less than 1"),
        (["{same}", "--alpha", "0"], "--alpha: Input should be greater than 0"),
        (["{same}", "--margin", "0.05"], "--margin: must be below --threshold 0.05, got 0.05"),
        (["{same}", "--last", "0"], "--last: Input should be greater than 0"),
        (["{same}", "--json", "{same}"], "--json: .* is a directory, not a file"),
        (["{same}", "--baseline", "{same}/runs/static-cap4-r1/records.parquet"], "not a directory"),
        (["{same}", "--metric", "fast"], "argument --metric: invalid choice"),
    ],
    ids=["candidate", "threshold", "alpha", "margin", "last", "json-dir", "baseline-file", "metric"],
)
def test_bad_input_is_one_line_and_exit_2(results, tmp_path, args, message):
    completed = gate(*[arg.format(same=results["same"]) for arg in args], history=tmp_path / "h.sqlite")
    assert completed.returncode == 2 and completed.stdout == ""
    assert len(completed.stderr.strip().splitlines()) == 1
    assert re.search(message, completed.stderr), completed.stderr
