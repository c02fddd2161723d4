"""How the probe prices a job: the reference's step costs at this machine's speed, where they apply."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.analysis.speed import machine_speed
from harness.paper.step_cost import LinearStepCost
from harness.probe import REFERENCE_SUMMARY, reference_step_costs

# What our launcher records of the CPU default's server (a run manifest's `server`).
CPU_DEFAULT = {"model": "tiny", "vllm_version": "0.32.0", "max_num_seqs": 16}


def test_the_committed_reference_prices_the_cpu_default_with_both_servers_costs():
    costs = reference_step_costs(CPU_DEFAULT, 16)
    assert costs is not None and set(costs) == {"continuous", "static"}
    models = {("static" if m["server"].startswith("static") else "continuous"): m
              for m in json.loads(REFERENCE_SUMMARY.read_text())["step_models"]}
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


def test_a_missing_reference_gives_none(tmp_path):
    assert reference_step_costs(CPU_DEFAULT, 16, tmp_path / "absent.json") is None


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
    cost = LinearStepCost(0.005, 0.0003, 7e-5, 3e-7).scaled(1.2)
    assert list(cost.coefficients().values()) == pytest.approx([0.006, 0.00036, 8.4e-5, 3.6e-7])
