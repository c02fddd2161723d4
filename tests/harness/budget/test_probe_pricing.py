"""How the probe prices a job: the reference's step costs at this machine's speed, where they apply."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.speed import machine_speed
from harness.budget.probe import reference_step_costs
from harness.paper.step_cost import LinearStepCost
from harness.reference import REFERENCE_SUMMARY, packaged_reference, reference_of

ROOT = Path(__file__).resolve().parents[3]
# What our launcher records of the CPU default's server (a run manifest's `server`).
CPU_DEFAULT = {"model": "tiny", "vllm_version": "0.32.0", "max_num_seqs": 16}


def test_the_packaged_figures_are_the_committed_reference_s():
    committed = reference_of(json.loads((ROOT / REFERENCE_SUMMARY).read_text()))
    assert packaged_reference() == committed, (
        "harness/reference/reference.json is not the committed reference's: write it again with"
        " .venv/bin/python -m harness.reference")


def test_the_committed_reference_prices_the_cpu_default_with_both_servers_costs():
    costs = reference_step_costs(CPU_DEFAULT, 16)
    assert costs is not None and set(costs) == {"continuous", "static"}
    models = {("static" if m["server"].startswith("static") else "continuous"): m
              for m in json.loads((ROOT / REFERENCE_SUMMARY).read_text())["step_models"]}
    assert costs["static"].per_sequence_s == models["static"]["per_sequence_s"]
    assert costs["continuous"].overhead_s == models["continuous"]["overhead_s"]


@pytest.mark.parametrize(("server", "batch_size"), [
    ({**CPU_DEFAULT, "model": "llama-3.1-8b"}, 16),
    ({**CPU_DEFAULT, "vllm_version": "0.33.0"}, 16),
    (CPU_DEFAULT, 4),
    (None, 16),
])
def test_another_model_b_or_vllm_gets_no_reference(server, batch_size):
    assert reference_step_costs(server, batch_size) is None


def test_a_reference_without_step_costs_gives_none():
    assert reference_step_costs(CPU_DEFAULT, 16, {**packaged_reference(), "step_models": []}) is None


# Run by an installed harness (not the editable one), from outside the checkout.
INSTALLED_PROBE = """
import harness.budget.probe as probe
costs = probe.reference_step_costs({"model": "tiny", "vllm_version": "0.32.0"}, 16)
print(probe.__file__, sorted(costs or {}))
"""


def test_an_installed_wheel_prices_with_the_reference(tmp_path):
    """A normal install has the reference's figures: built as a wheel, installed beside the venv's packages."""
    # Built from a copy of what the wheel is made of: a build in the checkout would reuse its build/ directory.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    for name in ("harness", "launchers", "workloads"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels),
                    str(source)], check=True, timeout=600)
    installed = tmp_path / "installed"
    venv.create(installed, with_pip=False)
    (site,) = installed.glob("lib/python*/site-packages")
    (wheel,) = wheels.glob("batchbench-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    # The venv's dependencies, but not its editable batchbench (whose finder a .pth there would install).
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    result = subprocess.run([str(installed / "bin" / "python"), "-c", INSTALLED_PROBE], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=True)
    module, costs = result.stdout.split(maxsplit=1)
    assert Path(module).is_relative_to(site) and costs.strip() == "['continuous', 'static']"


def steps_at(cost: LinearStepCost, slower: float, running: np.ndarray, prefill: np.ndarray) -> pd.DataFrame:
    """A step log whose every step lasted `slower` times what `cost` prices it at."""
    context = np.cumsum(running) * 10.0
    seconds = slower * (cost.overhead_s + cost.per_sequence_s * running + cost.per_prefill_token_s * prefill
                        + cost.per_context_token_s * context)
    starts = np.concatenate([[0.0], np.cumsum(seconds)[:-1]])
    return pd.DataFrame({
        "t_s": starts, "end_s": starts + seconds, "running": running, "waiting": np.zeros_like(running),
        "prefill_tokens": prefill, "decode_tokens": running, "context_tokens": context,
        "generated_tokens": running, "admitted": [[] for _ in running], "finished": [[] for _ in running],
    })


def test_the_machine_speed_is_the_probe_s_busy_time_over_the_priced_time():
    cost = LinearStepCost(0.005, 0.0003, 7e-5, 3e-7)
    running = np.array([16.0, 16.0, 12.0, 8.0, 4.0, 1.0, 1.0])
    prefill = np.array([400.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert machine_speed(steps_at(cost, 1.3, running, prefill), cost) == pytest.approx(1.3)
    assert machine_speed(steps_at(cost, 0.8, running, prefill), cost) == pytest.approx(0.8)


def test_scaling_a_cost_scales_every_coefficient():
    cost = LinearStepCost(0.005, 0.0003, 7e-5, 3e-7, 4e-8).scaled(1.2)
    assert list(cost.coefficients().values()) == pytest.approx([0.006, 0.00036, 8.4e-5, 3.6e-7, 4.8e-8])
