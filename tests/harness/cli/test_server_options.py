"""Every command that launches vLLM turns the same server options into the same ServerSpec."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

# Run in a child: importing harness.cli gevent-patches the process it runs in.
SPECS = """
import json, sys
from harness.cli.commands import build_parser
from harness.cli.server_options import server_spec

commands = {
    "serve": ["serve", "--mode", "static"],
    "run": ["run", "--workload", "w.yaml", "--launch", "static", "--out", "o"],
    "reproduce": ["reproduce"],
}
specs = {}
for name, command in commands.items():
    args = build_parser().parse_args(command + sys.argv[1:])
    specs[name] = server_spec(args, "static").model_dump(mode="json")
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
    assert spec["vllm_args"] == [] and spec["batch_wait_s"] == 1.0 and spec["kv_cache_bytes"] is None
    assert spec["startup_timeout_s"] == 600.0 and spec["allow_untested_vllm"] is False


def test_every_option_reaches_the_spec():
    built = specs(
        "--model", "opt-13b", "--max-num-seqs", "8", "--host", "0.0.0.0", "--batch-wait-s", "0.5",
        "--kv-cache-bytes", "4096", "--startup-timeout-s", "60", "--layout", "as-launched",
        "--vllm-arg=--enforce-eager", "--vllm-arg=--seed=3", "--placement", "one-at-a-time",
        "--server-python", "/opt/vllm/bin/python",
        "--server-env", "VLLM_CPU_KVCACHE_SPACE=2", "--server-env", "OMP_NUM_THREADS=1", "--allow-untested-vllm",
    )
    assert built["serve"] == built["run"] == built["reproduce"]
    assert built["run"] == {
        "mode": "static",
        "model": "opt-13b",
        "max_num_seqs": 8,
        "host": "0.0.0.0",
        "port": None,
        "vllm_args": ["--enforce-eager", "--seed=3"],
        "placement": "one-at-a-time",
        "batch_wait_s": 0.5,
        "async_scheduling": None,
        "kv_cache_bytes": 4096,
        "startup_timeout_s": 60.0,
        "stop_grace_s": 20.0,
        "layout": "as-launched",
        "server_python": "/opt/vllm/bin/python",
        "server_env": ["VLLM_CPU_KVCACHE_SPACE=2", "OMP_NUM_THREADS=1"],
        "allow_untested_vllm": True,
    }



FLAGS = """
import json
from harness.cli.commands import build_parser
from harness.cli.options import OPTIONS
from launchers import ServerConfig

commands = build_parser()._subparsers._group_actions[0].choices
actions = {command: {action.dest: action for action in parser._actions} for command, parser in commands.items()}
print(json.dumps({
    "flags": {
        command: {
            name: {"flags": actions[command][name].option_strings, "default": actions[command][name].default,
                   "help": actions[command][name].help, "choices": actions[command][name].choices}
            for name in ServerConfig.model_fields
        }
        for command in ("serve", "run", "reproduce")
    },
    "fields": {name: [field.default, field.description] for name, field in ServerConfig.model_fields.items()},
    "unchecked": {command: [name for model in models for name, field in model.model_fields.items()
                            if name not in actions[command] and (field.json_schema_extra or {}).get("cli", True)]
                  for command, models in OPTIONS.items()},
}))
"""


@functools.cache
def parsers() -> dict:
    result = subprocess.run([sys.executable, "-c", FLAGS], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(result.stdout)


def test_server_flags_are_generated_from_the_model():
    found = parsers()
    flags, fields = found["flags"], found["fields"]
    # reproduce leaves B unset so that a preset can fill it (harness.cli.reproduce.apply_preset); else as serve's.
    reproduce = {**flags["reproduce"], "max_num_seqs": {**flags["reproduce"]["max_num_seqs"], "default": 16}}
    assert flags["reproduce"]["max_num_seqs"]["default"] is None
    assert flags["serve"] == flags["run"] == reproduce
    serve = flags["serve"]
    assert [flag for name in fields for flag in serve[name]["flags"]] == [
        "--model", "--max-num-seqs", "--host", "--batch-wait-s", "--kv-cache-bytes", "--startup-timeout-s",
        "--layout", "--vllm-arg", "--placement", "--server-python", "--server-env", "--allow-untested-vllm",
    ]
    for name, (default, description) in fields.items():
        assert description in serve[name]["help"], name
        if name not in ("model", "vllm_args", "server_env"):
            assert serve[name]["default"] == default, name
    # Unset against an endpoint (its only model); the spec's default applies when launching.
    assert serve["model"]["default"] is None and "(default tiny)" in serve["model"]["help"]
    assert serve["vllm_args"]["default"] == [] and fields["vllm_args"][0] == []
    assert serve["server_env"]["default"] == [] and fields["server_env"][0] == []
    assert "(default 16)" in serve["max_num_seqs"]["help"] and "(default 127.0.0.1)" in serve["host"]["help"]
    assert "(default 600)" in serve["startup_timeout_s"]["help"]
    assert serve["layout"]["choices"] == ["auto", "engine-with-worker", "yield-engine", "as-launched"]
    assert serve["placement"]["choices"] == ["auto", "shared", "one-at-a-time"]


def test_every_checked_field_is_an_option_of_its_command():
    unchecked = parsers()["unchecked"]
    assert unchecked == dict.fromkeys(unchecked, [])
