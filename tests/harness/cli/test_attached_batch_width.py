"""`batchbench run --endpoint` holds --max-num-seqs to the B a real vLLM states (its /server_info)."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest

WORKLOAD = """\
name: b-check
description: four short requests sent at once
seed: 7
num_requests: 4
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: fixed, value: 8}
arrival: {kind: burst}
"""


def run_against(url: str, workload, out, max_num_seqs: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", url, "--model",
         "tiny", "--max-num-seqs", str(max_num_seqs), "--out", str(out), "--no-history"],
        capture_output=True, text=True, timeout=600,
    )


def prompt_tokens(url: str) -> float:
    """The engine's vllm:prompt_tokens_total: prompt tokens of every request it was given."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    values = re.findall(r"^vllm:prompt_tokens_total\{[^}]*\} (\S+)$", text, re.M)
    assert values, "no vllm:prompt_tokens_total on /metrics"
    return sum(float(value) for value in values)


@pytest.mark.server
def test_an_attached_vllm_stating_b_is_held_to_it(servers, tmp_path):
    workload = tmp_path / "b.yaml"
    workload.write_text(WORKLOAD)
    # The pooled server runs in vLLM's dev mode (tests/conftest.py), which serves /server_info, the one place vLLM
    # states max_num_seqs.
    url = servers.get("continuous", 4).base_url
    # Its metrics do not state B: the one config gauge is the cache's.
    assert "max_num_seqs" not in httpx.get(f"{url}/metrics", timeout=10).text

    served = prompt_tokens(url)
    wrong = run_against(url, workload, tmp_path / "wrong", 8)
    assert wrong.returncode == 2, wrong.stderr[-2000:]
    line = (f"batchbench: error: --max-num-seqs 8 does not match the server at {url}, which runs max_num_seqs 4"
            " (its /server_info?config_format=json): pass --max-num-seqs 4")
    assert wrong.stderr.splitlines() == [line]
    # Refused before any load: no prompt reached the engine, no run directory.
    assert prompt_tokens(url) == served
    assert not (tmp_path / "wrong").exists()

    right = run_against(url, workload, tmp_path / "right", 4)
    assert right.returncode == 0, right.stderr[-2000:]
    assert f"B = 4: stated by the server at {url} (/server_info?config_format=json)" in right.stderr
    assert prompt_tokens(url) > served
