"""The shipped workload files: all load, plan, and match the experiments they encode."""

from __future__ import annotations

import pytest

import workloads
from harness.errors import UsageError
from harness.workload import ExponentialLength, build_plan, load_spec

BUILTINS = workloads.list_builtin_workloads()
CAPS = [32, 128, 512, 1536]


def test_the_expected_workloads_ship():
    expected = {f"anyscale-cap{cap}" for cap in CAPS} | {f"cpu-anyscale-cap{cap}" for cap in CAPS}
    expected |= {
        "seed-100-200-300-1000",
        "cpu-seed-100-200-300-1000",
        "cpu-fixed-closed16",
        "cpu-poisson",
    }
    assert expected <= set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_loads_and_plans(name):
    spec = load_spec(workloads.builtin_workload_path(name))
    assert spec.name == name
    assert spec.description
    plan = build_plan(spec)
    if spec.num_requests is not None:
        assert len(plan.requests) == spec.num_requests
    elif spec.trace is not None:  # every row of the trace's window
        assert plan.requests and plan.arrival == "trace"
    else:  # by duration: arrivals within it
        assert plan.requests and max(request.arrival_s for request in plan.requests) < spec.duration_s
    if spec.scaled_from is not None:
        assert spec.scaled_from in BUILTINS
        published = load_spec(spec.scaled_from)
        # A burst stays a burst; a Poisson variant may scale its rate (the latency sweep sets its own rates).
        assert published.arrival.kind == spec.arrival.kind
        assert published.arrival == spec.arrival or spec.arrival.kind == "poisson"


@pytest.mark.parametrize("cap", CAPS)
def test_anyscale_shape(cap):
    spec = load_spec(f"anyscale-cap{cap}")
    assert spec.num_requests == 1000 and spec.arrival.kind == "burst"
    assert spec.output_tokens == ExponentialLength(mean=128, cap=cap)
    plan = build_plan(spec)
    assert {r.prompt_tokens for r in plan.requests} == {512}
    assert max(r.output_tokens for r in plan.requests) <= cap


@pytest.mark.parametrize("cap", CAPS)
def test_cpu_anyscale_keeps_the_output_distribution(cap):
    cpu, full = load_spec(f"cpu-anyscale-cap{cap}"), load_spec(f"anyscale-cap{cap}")
    assert cpu.output_tokens == full.output_tokens
    assert cpu.num_requests >= 64 and cpu.scaled_from == full.name and cpu.scaling


def test_cpu_seed_batches_of_sixteen_hold_four_of_each_length():
    plan = build_plan(load_spec("cpu-seed-100-200-300-1000"))
    outputs = [r.output_tokens for r in plan.requests]
    assert outputs == [100, 200, 300, 1000] * 16
    for start in range(0, len(outputs), 16):
        batch = outputs[start : start + 16]
        # Each static batch runs 1000 steps with 40% of its slots useful, as in the seed's example.
        assert sum(batch) / (16 * max(batch)) == 0.4


def test_cpu_fixed_closed16():
    plan = build_plan(load_spec("cpu-fixed-closed16"))
    assert plan.arrival == "closed" and plan.users == 16 and len(plan.requests) == 320
    assert {(r.prompt_tokens, r.output_tokens) for r in plan.requests} == {(64, 256)}


def test_unknown_builtin_is_a_usage_error():
    known = r"nope: no builtin workload of that name \(builtins: .*cpu-poisson"
    with pytest.raises(UsageError, match=known):
        workloads.builtin_workload_path("nope")
    assert workloads.builtin_workload_path("cpu-poisson.yaml").name == "cpu-poisson.yaml"


def test_the_nightly_latency_workload_is_the_sweeps_at_one_rate():
    fixed, sweep = load_spec("cpu-anyscale-latency-at-3rps"), load_spec("cpu-anyscale-latency")
    assert (fixed.prompt_tokens, fixed.output_tokens, fixed.seed) == (sweep.prompt_tokens, sweep.output_tokens,
                                                                       sweep.seed)
    assert fixed.arrival.kind == "poisson" and fixed.arrival.rate == 3 and fixed.duration_s == 24
