"""`batchbench predict` through the real command line: its table, and bad input.

Each call is a child process: importing harness.cli gevent-patches the process it runs in.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def predict(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "predict", *args], capture_output=True, text=True, timeout=300
    )


def test_predict_prints_predictions_beside_the_published_figures():
    result = predict("--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-cap32, anyscale-cap1536")
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "| anyscale-cap32 | 16 | 5,713 | 6,121 | 0.93x (-6.7%) |" in out
    assert "| anyscale-cap1536 | 4 | 2,264 | 1,898 | 1.19x (+19.3%) |" in out
    assert "6.38x slower than that floor" in out
    for assumption in ("Bandwidth 1.555 TB/s", "Efficiency 0.52", "Overhead 14.0 ms", "KV allowance 12.88 GB",
                       "Prefill/decode mix per step", "Full cache: preempt"):
        assert assumption in out
    assert "Sensitivity" not in out


@pytest.mark.parametrize("flag", ["--max-num-seqs", "--batch-size"])  # the second: the flag's old name, kept
def test_predict_sensitivity_and_batch_size(flag):
    result = predict("--model", "llama-3.1-8b", "--gpu", "h100", "--workloads", "seed-100-200-300-1000",
                     flag, "128", "--sensitivity")
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "| seed-100-200-300-1000 | 128 |" in out
    assert "bandwidth -20% (of 3.35 TB/s)" in out


def test_predict_rates_prints_each_systems_latency_curve():
    result = predict("--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-latency",
                     "--rates", "1,4", "--slo-e2e-p99-s", "25")
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "p50 TTFT <= 1 s and p99 E2E <= 25 s" in out
    assert "| continuous | 4 |" in out and "| static | 1 |" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--model", "opt-13b", "--gpu", "h100", "--workloads", "anyscale-cap32"], "no setup for model 'opt-13b'"),
        (["--model", "gpt-5", "--gpu", "h100", "--workloads", "anyscale-cap32"], "invalid choice: 'gpt-5'"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "nope"], "nope: no such file"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", " , "], "--workloads: give at least one"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "cpu-poisson"], "burst workloads"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-cap32", "--rates", "4"],
         "--rates needs workloads with Poisson arrivals"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-latency", "--rates", "4,-8"],
         "--rates: every value must be a positive number"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-latency", "--rates", "4",
          "--sensitivity"], "--sensitivity: varies the throughput prediction of bursts"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-latency", "--rates", "4",
          "--batch-wait-s", "-1"], "--batch-wait-s"),
        (["--model", "opt-13b", "--gpu", "a100-40gb", "--workloads", "anyscale-cap32", "--max-num-seqs", "0"],
         "--max-num-seqs: Input should be greater than 0"),
        (["--model", "opt-13b", "--gpu", "a100-40gb"], "--workloads"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragment):
    result = predict(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchbench: error: "), result.stderr
    assert fragment in lines[0]
    assert result.stdout == ""
