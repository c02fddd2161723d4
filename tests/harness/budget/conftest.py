"""Workloads whose schedules can be counted by hand, and a step cost that makes them seconds."""

from __future__ import annotations

import pytest

from harness.budget import MachineCost
from harness.paper.simulate import InterpolatedStepCost
from harness.workload import WorkloadSpec

# Every step 10 ms whatever the batch: 16 requests of 100 output tokens take 1 s.
TEN_MS = InterpolatedStepCost.from_points({1: 0.01})


def _fixed_workload(name="fixed", num_requests=32, output_tokens=100, arrival=None, **fields):
    """A workload of fixed 8-token prompts and fixed output lengths, sent at once unless told."""
    return WorkloadSpec.model_validate({
        "name": name, "seed": 0, "num_requests": num_requests, "prompt_tokens": {"kind": "fixed", "value": 8},
        "output_tokens": {"kind": "fixed", "value": output_tokens}, "arrival": arrival or {"kind": "burst"},
        **fields,
    })


@pytest.fixture
def fixed_workload():
    return _fixed_workload


@pytest.fixture
def ten_ms():
    return TEN_MS


@pytest.fixture
def machine():
    """10 ms steps in 16 rows, and 2 s per run besides the engine's steps."""
    return MachineCost(TEN_MS, batch_size=16, run_overhead_s=2.0)
