"""A GPU profile's real shapes on the CPU, layers cut: prepare-model, a static run, analyze.

Llama-3.1-8B with one decoder layer keeps its 128,256-token vocabulary, GQA heads, bf16
and its tokenizer config, so this is where the dummy-weights path, a large vocabulary
and the CPU context cap meet a real server. One server, in static mode: its scheduler is
the recorder's with static admission on top, so it takes every path continuous mode takes
and more. OPT-13B is left to the unit tests: a second server start would double this
test's time for no path Llama does not take.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from launchers.cpu_dtype import cpu_flags, cpu_serving_dtype

pytestmark = pytest.mark.server

MODEL = "llama-3.1-8b:layers=1"
# Few, short outputs: a decode step of this model costs ~0.2 s on one core (the 128k-row
# LM head), and the point is shapes and exact lengths, not throughput.
WORKLOAD = """\
name: real-shapes
description: four short requests on a real vocabulary, sent at once
seed: 3
num_requests: 4
prompt_tokens: {kind: fixed, value: 24}
output_tokens: {kind: choice, values: [2, 3, 5, 6], order: cycle}
arrival: {kind: burst}
"""


def batchbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.ends_pooled_server("own_servers")
def test_llama_shapes_with_one_layer_serve_a_static_run(servers, tmp_path):
    servers.close()  # no pooled server beside this test's own
    prepared = batchbench("prepare-model", MODEL)
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    directory = Path(prepared.stdout.split(" (")[0].strip())
    config = json.loads((directory / "config.json").read_text())
    assert (config["num_hidden_layers"], config["vocab_size"], config["num_key_value_heads"]) == (1, 128_256, 8)

    workload = tmp_path / "real-shapes.yaml"
    workload.write_text(WORKLOAD)
    # bfloat16 where this CPU computes in it, else float32 (launchers.cpu_dtype).
    dtype = cpu_serving_dtype("bfloat16", cpu_flags())
    out = tmp_path / "runs" / "static"
    # Eager: torch.compile of a new shape costs ~45 s per start on a cold cache.
    launched = batchbench("run", "--workload", str(workload), "--launch", "static", "--model", MODEL,
                          "--max-num-seqs", "4", "--out", str(out), "--no-warmup", "--no-history",
                          "--vllm-arg=--enforce-eager")
    stderr = launched.stderr
    assert launched.returncode == 0, stderr[-3000:]
    # The run counted its prompts with the server's /tokenize, not only the local tokenizer.
    assert "no /tokenize" not in stderr
    assert f"model {MODEL}: profile llama-3.1-8b, 1 of 32 layers, dtype {dtype}" in stderr
    rows = pd.read_parquet(out / "records.parquet")
    assert rows.ok.all() and not rows.length_mismatch.any()
    assert list(rows.sort_values("request_id").completion_tokens) == [2, 3, 5, 6]
    assert (rows.completion_tokens == rows.planned_output_tokens).all()
    assert (rows.usage_completion_tokens == rows.completion_tokens).all()
    assert (rows.prompt_tokens == 24).all()
    # The step log holds every token the 128k-vocabulary model sampled, and each admission once.
    steps = pd.read_parquet(out / "steps.parquet")
    assert steps.generated_tokens.sum() == 16 and sorted(steps.admitted.explode().dropna()) == [0, 1, 2, 3]

    manifest = json.loads((out / "manifest.json").read_text())
    server = manifest["server"]
    argv = server["argv"]
    assert manifest["model"] == MODEL and server["mode"] == "static"
    assert (server["profile"], server["layers"], server["dtype"]) == ("llama-3.1-8b", 1, dtype)
    assert argv[argv.index("--dtype") + 1] == dtype
    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    assert server["model_path"] == str(directory)

    report = tmp_path / "report"
    analyzed = batchbench("analyze", str(out), "--out", str(report))
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    assert "static" in (report / "report.md").read_text()
