"""The bad-input corpus: command-line values and workload files, through the real CLI.

Every case: exit 2, one line on stderr naming the problem, no traceback, nothing written.
Each is refused before any server is probed: the endpoint given (port 9) answers nothing,
so a case that got as far as probing would say "cannot reach" instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

WORKLOAD = """\
name: corpus
seed: 1
num_requests: 4
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: fixed, value: 8}
arrival: {kind: burst}
"""
NOWHERE = "http://127.0.0.1:9"


def batchbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def files_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def assert_refused(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchbench: error: "), result.stderr[-2000:]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr and "cannot reach" not in result.stderr


@pytest.fixture
def place(tmp_path):
    """A working directory with a good workload, a file and a non-empty directory in it."""
    (tmp_path / "good.yaml").write_text(WORKLOAD)
    (tmp_path / "a-file").write_text("not a directory")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "something").write_text("x")
    return tmp_path


RUN = ["run", "--workload", "good.yaml", "--endpoint", NOWHERE]
CLI_CASES = {
    "B zero": ([*RUN, "--out", "o", "--max-num-seqs", "0"], "--max-num-seqs: Input should be greater than 0"),
    "B negative": ([*RUN, "--out", "o", "--max-num-seqs", "-4"], "--max-num-seqs: Input should be greater than 0"),
    "B huge": ([*RUN, "--out", "o", "--max-num-seqs", "10000000"], "--max-num-seqs: Input should be less than"),
    "B not an int": ([*RUN, "--out", "o", "--max-num-seqs", "1e3"], "--max-num-seqs: invalid int value"),
    "telemetry nan": (
        [*RUN, "--out", "o", "--telemetry-interval-s", "nan"],
        "--telemetry-interval-s: Input should be a finite number",
    ),
    "telemetry inf": (
        [*RUN, "--out", "o", "--telemetry-interval-s", "inf"],
        "--telemetry-interval-s: Input should be a finite number",
    ),
    "telemetry zero": (
        [*RUN, "--out", "o", "--telemetry-interval-s", "0"],
        "--telemetry-interval-s: Input should be greater than 0",
    ),
    "telemetry negative": (
        [*RUN, "--out", "o", "--telemetry-interval-s", "-1"],
        "--telemetry-interval-s: Input should be greater than 0",
    ),
    "users negative": ([*RUN, "--out", "o", "--max-users", "-5"], "--max-users: Input should be greater than 0"),
    "users zero": ([*RUN, "--out", "o", "--max-users", "0"], "--max-users: Input should be greater than 0"),
    "stall zero": ([*RUN, "--out", "o", "--stall-timeout-s", "0"], "--stall-timeout-s: Input should be greater than 0"),
    "stall nan": (
        [*RUN, "--out", "o", "--stall-timeout-s", "nan"],
        "--stall-timeout-s: Input should be a finite number",
    ),
    "first byte timeout nan": (
        [*RUN, "--out", "o", "--first-byte-timeout-s", "nan"],
        "--first-byte-timeout-s: Input should be a finite number",
    ),
    "stall beyond a week": (
        [*RUN, "--out", "o", "--stall-timeout-s", "1e9"],
        "--stall-timeout-s: Input should be less than",
    ),
    "batch wait negative": (
        [*RUN, "--out", "o", "--batch-wait-s", "-1"],
        "--batch-wait-s: Input should be greater than or equal to 0",
    ),
    "startup timeout inf": (
        [*RUN, "--out", "o", "--startup-timeout-s", "inf"],
        "--startup-timeout-s: Input should be a finite number",
    ),
    "kv cache zero": (
        [*RUN, "--out", "o", "--kv-cache-bytes", "0"],
        "--kv-cache-bytes: Input should be greater than 0",
    ),
    "out is a file": ([*RUN, "--out", "a-file"], "--out: a-file is a file, not a directory"),
    "out under a file": ([*RUN, "--out", "a-file/run"], "--out: a-file/run lies under a-file, which is a file"),
    "out unwritable": ([*RUN, "--out", "/sys/batchbench-run"], "--out: cannot create anything in /sys"),
    "out not empty": ([*RUN, "--out", "full"], "output directory full is not empty"),
    "tokenizer not a directory": (
        [*RUN, "--out", "o", "--tokenizer", "no-such-dir"],
        "--tokenizer: no-such-dir is not a directory",
    ),
    "naive on a static server": (
        [*RUN[:3], "--launch", "static", "--system", "naive", "--out", "o"],
        "--system naive sends waves from the client: launch a continuous server",
    ),
    "unknown system": ([*RUN, "--out", "o", "--system", "dynamic"], "unknown system 'dynamic'"),
    "unknown backend": ([*RUN, "--out", "o", "--backend", "ollama"], "invalid choice: 'ollama'"),
    "backend with a launched vLLM": (
        [*RUN[:3], "--launch", "continuous", "--backend", "transformers", "--out", "o"],
        "--launch continuous starts a vllm server: --backend transformers is for a server at --endpoint",
    ),
    "backend with a launched transformers server": (
        [*RUN[:3], "--launch", "hf-sequential", "--backend", "vllm", "--out", "o"],
        "--launch hf-sequential starts a transformers server: --backend vllm is for a server at --endpoint",
    ),
    "transformers system on a vLLM server": (
        [*RUN[:3], "--launch", "continuous", "--system", "hf-continuous", "--out", "o"],
        "--system hf-continuous does not match --launch continuous",
    ),
    "transformers over a budget": (
        ["reproduce", "--transformers", "--budget-min", "20", "--out", "o"],
        "--budget-min: a budget prices vLLM's engine steps, and transformers serve records none",
    ),
    "transformers over an endpoint": (
        ["reproduce", "--transformers", "--endpoint", NOWHERE, "--out", "o"],
        "--transformers launches its servers here: drop --endpoint",
    ),
    "transformers serve with a weightless profile": (
        [*RUN[:3], "--launch", "hf-continuous", "--model", "opt-13b:layers=1", "--out", "o"],
        "transformers serve loads real weights, and opt-13b:layers=1 has none",
    ),
    "backend over workers": (
        [*RUN, "--out", "o", "--backend", "openai", "--workers", "2"],
        "the openai backend runs in one process only: drop --workers",
    ),
    "api key variable unset": (
        [*RUN, "--out", "o", "--api-key-env", "BATCHBENCH_NO_SUCH_VARIABLE"],
        "that environment variable is not set",
    ),
    "no such workload": (
        ["run", "--workload", "nope.yaml", "--endpoint", NOWHERE, "--out", "o"],
        "nope.yaml: no such file",
    ),
    "serve port zero": (
        ["serve", "--mode", "static", "--port", "0"],
        "--port: Input should be greater than or equal to 1",
    ),
    "serve port too high": (
        ["serve", "--mode", "static", "--port", "70000"],
        "--port: Input should be less than or equal to 65535",
    ),
    "reproduce zero repetitions": (
        ["reproduce", "--repetitions", "0"],
        "--repetitions: Input should be greater than 0",
    ),
    "reproduce out is a file": (["reproduce", "--out", "a-file"], "--out: a-file is a file"),
    "sweep-rates fractions not numbers": (["sweep-rates", "--fractions", "0.5,x"], "--fractions: a comma-separated"),
    "sweep-rates a zero rate": (["sweep-rates", "--rates", "0,4"], "--rates: every value must be a positive number"),
    "sweep-rates runs too short": (["sweep-rates", "--measure-s", "0.5"], "--measure-s: Input should be greater"),
    "sweep-rates negative SLO": (["sweep-rates", "--slo-ttft-p50-s", "-1"], "--slo-ttft-p50-s: Input should be"),
    "sweep-rates zero budget": (["sweep-rates", "--budget-min", "0"], "--budget-min: Input should be greater than 0"),
    "sweep-rates burst below B": (["sweep-rates", "--saturation-requests", "4"], "--saturation-requests: at least B"),
    "sweep-rates analyze not a sweep": (["sweep-rates", "--analyze", "full"], "not a rate sweep's report directory"),
    "sweep-rates out is a file": (["sweep-rates", "--out", "a-file"], "--out: a-file is a file"),
    "analyze out is a file": (["analyze", "full", "--out", "a-file"], "--out: a-file is a file"),
    "analyze out under a file": (["analyze", "full", "--out", "a-file/r"], "--out: a-file/r lies under a-file"),
    "analyze out holds other things": (
        ["analyze", "a-file", "--out", "full"],
        "--out: full holds something other than an earlier report",
    ),
}


@pytest.mark.parametrize("name", CLI_CASES)
def test_bad_command_line_values(place, name):
    args, fragment = CLI_CASES[name]
    before = files_under(place)
    assert_refused(batchbench(*args, cwd=place), fragment)
    assert files_under(place) == before


def edit(old: str, new: str) -> str:
    assert old in WORKLOAD
    return WORKLOAD.replace(old, new)


YAML_CASES = {
    "length true": (edit("value: 8", "value: true"), "output_tokens.value: Input should be a valid integer"),
    "length as a string": (edit("value: 8", 'value: "8"'), "output_tokens.value: Input should be a valid integer"),
    "length 1e20": (
        edit("value: 8", "value: 100000000000000000000"),
        "output_tokens.value: Input should be less than or equal to 10000000",
    ),
    "length a float": (edit("value: 8", "value: 8.5"), "output_tokens.value: Input should be a valid integer"),
    "mean nan": (
        edit("{kind: fixed, value: 8}", "{kind: exponential, mean: .nan, cap: 64}"),
        "output_tokens.mean: Input should be a finite number",
    ),
    "mean inf": (
        edit("{kind: fixed, value: 8}", "{kind: exponential, mean: .inf, cap: 64}"),
        "output_tokens.mean: Input should be a finite number",
    ),
    "weight inf": (
        edit("{kind: fixed, value: 8}", "{kind: choice, values: [1, 2], weights: [1, .inf]}"),
        "output_tokens.weights.1: Input should be a finite number",
    ),
    "weight bool": (
        edit("{kind: fixed, value: 8}", "{kind: choice, values: [1, 2], weights: [1, true]}"),
        "output_tokens.weights.1: Input should be a valid number",
    ),
    "spread 1.5": (edit("{kind: fixed, value: 8}", "{kind: uniform, mean: 8, spread: 1.5}"), "output_tokens.spread"),
    "rate 1e-300": (edit("{kind: burst}", "{kind: poisson, rate: 1.0e-300}"), "would be due after"),
    "closed loop for 1e9 s": (
        edit("num_requests: 4", "duration_s: 1.0e+9").replace("{kind: burst}", "{kind: closed, users: 2}"),
        "duration_s: Input should be less than or equal to 604800",
    ),
    "closed loop pool too large": (
        edit("num_requests: 4", "duration_s: 3600").replace("{kind: burst}", "{kind: closed, users: 1000}"),
        "plans 3.6e+07 requests",
    ),
    "num_requests zero": (edit("num_requests: 4", "num_requests: 0"), "num_requests: Input should be greater than 0"),
    "num_requests too many": (
        edit("num_requests: 4", "num_requests: 100000000"),
        "num_requests: Input should be less than or equal to 1000000",
    ),
    "seed negative": (edit("seed: 1", "seed: -1"), "seed: Input should be greater than or equal to 0"),
    "seed true": (edit("seed: 1", "seed: true"), "seed: Input should be a valid integer"),
    "users true": (
        edit("num_requests: 4", "duration_s: 5").replace("{kind: burst}", "{kind: closed, users: true}"),
        "arrival.users: Input should be a valid integer",
    ),
    "duplicate key": (WORKLOAD + "seed: 2\n", "duplicate key 'seed'"),
    "not a mapping": ("- a\n- b\n", "expected a mapping of workload fields"),
    "unknown key": (WORKLOAD + "colour: blue\n", "colour: Extra inputs are not permitted"),
}


@pytest.mark.parametrize("name", YAML_CASES)
def test_bad_workload_files(place, name):
    content, fragment = YAML_CASES[name]
    (place / "bad.yaml").write_text(content)
    before = files_under(place)
    result = batchbench("run", "--workload", "bad.yaml", "--endpoint", NOWHERE, "--out", "o", cwd=place)
    assert_refused(result, fragment)
    assert files_under(place) == before
