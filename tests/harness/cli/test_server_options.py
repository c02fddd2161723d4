"""Every command that launches vLLM turns the same server options into the same ServerSpec."""

from __future__ import annotations

import json
import subprocess
import sys

# Run in a child: importing harness.cli gevent-patches the process it runs in.
SPECS = """
import dataclasses, json, sys
from harness.cli import build_parser
from harness.cli.server_options import server_spec

commands = {
    "serve": ["serve", "--mode", "static"],
    "run": ["run", "--workload", "w.yaml", "--launch", "static", "--out", "o"],
    "reproduce": ["reproduce"],
}
specs = {}
for name, command in commands.items():
    args = build_parser().parse_args(command + sys.argv[1:])
    specs[name] = dataclasses.asdict(server_spec(args, "static"))
print(json.dumps(specs))
"""


def specs(*options: str) -> dict[str, dict]:
    result = subprocess.run(
        [sys.executable, "-c", SPECS, *options], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(result.stdout)


def test_defaults_launch_the_tiny_model_on_localhost():
    built = specs()
    assert built["serve"] == built["run"] == built["reproduce"]
    spec = built["serve"]
    assert spec["mode"] == "static" and spec["model"] == "tiny" and spec["max_num_seqs"] == 16
    assert spec["host"] == "127.0.0.1" and spec["port"] is None and spec["layout"] == "auto"
    assert spec["extra_args"] == [] and spec["batch_wait_s"] == 0.0 and spec["kv_cache_bytes"] is None
    assert spec["startup_timeout_s"] == 600.0


def test_every_option_reaches_the_spec():
    built = specs(
        "--model", "opt-13b", "--max-num-seqs", "8", "--host", "0.0.0.0", "--batch-wait-s", "0.5",
        "--kv-cache-bytes", "4096", "--startup-timeout-s", "60", "--layout", "as-launched",
        "--vllm-arg=--enforce-eager", "--vllm-arg=--seed=3",
    )
    assert built["serve"] == built["run"] == built["reproduce"]
    assert built["run"] == {
        "mode": "static",
        "model": "opt-13b",
        "max_num_seqs": 8,
        "host": "0.0.0.0",
        "port": None,
        "extra_args": ["--enforce-eager", "--seed=3"],
        "batch_wait_s": 0.5,
        "async_scheduling": None,
        "kv_cache_bytes": 4096,
        "startup_timeout_s": 60.0,
        "stop_grace_s": 20.0,
        "layout": "as-launched",
    }

