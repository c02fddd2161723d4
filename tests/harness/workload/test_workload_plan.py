"""Request plans: byte-identical JSON, independent streams, arrival processes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.errors import UsageError
from harness.workload import (
    BurstArrival,
    ChoiceLength,
    ClosedLoopArrival,
    ExponentialLength,
    FixedLength,
    PoissonArrival,
    RequestPlan,
    UniformLength,
    WorkloadSpec,
    build_plan,
    load_spec,
)
from harness.workload.plan import CLOSED_LOOP_REQUESTS_PER_USER_SECOND


def make_spec(**overrides) -> WorkloadSpec:
    fields = {
        "name": "t",
        "seed": 11,
        "num_requests": 200,
        "prompt_tokens": UniformLength(mean=64, spread=0.5),
        "output_tokens": ExponentialLength(mean=128, cap=512),
        "arrival": PoissonArrival(rate=8),
    }
    return WorkloadSpec(**(fields | overrides))


SPEC_YAML = """\
name: repeat
seed: 5
num_requests: 50
prompt_tokens: {kind: uniform, mean: 64, spread: 0.5}
output_tokens: {kind: exponential, mean: 128, cap: 32}
arrival: {kind: poisson, rate: 3, burstiness: 0.5}
"""


def test_same_spec_from_two_loads_gives_byte_identical_json(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_YAML, encoding="utf-8")
    first, second = build_plan(load_spec(path)), build_plan(load_spec(path))
    assert first.to_json() == second.to_json()
    assert first.sha256() == second.sha256()
    assert len(first.sha256()) == 64


def test_json_is_canonical_and_round_trips():
    plan = build_plan(make_spec(num_requests=3))
    text = plan.to_json()
    decoded = json.loads(text)
    assert list(decoded) == sorted(decoded)
    assert list(decoded["requests"][0]) == ["arrival_s", "index", "output_tokens", "prompt_tokens"]
    assert b" " not in text
    assert decoded["version"] == 1 and decoded["spec_name"] == "t" and decoded["seed"] == 11
    assert decoded["requests"][0]["arrival_s"] == 0.0
    assert all(len(repr(r["arrival_s"]).split(".")[1]) <= 6 for r in decoded["requests"])
    again = RequestPlan.from_json(text)
    assert again == plan and again.to_json() == text
    assert RequestPlan.from_json(text.decode()) == plan


def test_other_seed_gives_other_plan():
    assert build_plan(make_spec(seed=1)).sha256() != build_plan(make_spec(seed=2)).sha256()


def test_changing_one_distribution_leaves_the_other_columns_alone():
    before = build_plan(make_spec()).to_frame()
    after = build_plan(make_spec(output_tokens=ChoiceLength(values=(7, 9)))).to_frame()
    assert before["prompt_tokens"].equals(after["prompt_tokens"])
    assert before["arrival_s"].equals(after["arrival_s"])
    assert set(after["output_tokens"]) == {7, 9}


def test_burst_sends_everything_at_zero():
    plan = build_plan(make_spec(arrival=BurstArrival(), num_requests=5))
    assert plan.arrival == "burst" and plan.users is None
    assert [r.arrival_s for r in plan.requests] == [0.0] * 5
    assert [r.index for r in plan.requests] == list(range(5))


def test_closed_loop_has_users_and_no_send_times():
    plan = build_plan(make_spec(arrival=ClosedLoopArrival(users=16), num_requests=128))
    assert plan.arrival == "closed" and plan.users == 16
    assert len(plan.requests) == 128
    assert all(r.arrival_s is None for r in plan.requests)
    assert plan.to_frame()["arrival_s"].isna().all()


def test_closed_loop_with_duration_plans_a_generous_count():
    spec = make_spec(arrival=ClosedLoopArrival(users=4), num_requests=None, duration_s=2.5)
    plan = build_plan(spec)
    assert plan.duration_s == 2.5
    assert len(plan.requests) == 4 * 3 * CLOSED_LOOP_REQUESTS_PER_USER_SECOND


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_poisson_gaps_have_mean_one_over_rate_and_gamma_cv(burstiness):
    spec = make_spec(arrival=PoissonArrival(rate=8, burstiness=burstiness), num_requests=20_000)
    times = build_plan(spec).to_frame()["arrival_s"].to_numpy()
    gaps = np.diff(times)
    assert times[0] == 0.0 and (gaps >= 0).all()
    assert gaps.mean() == pytest.approx(1 / 8, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_poisson_with_duration_stops_at_the_duration():
    spec = make_spec(arrival=PoissonArrival(rate=50), num_requests=None, duration_s=40)
    plan = build_plan(spec)
    times = [r.arrival_s for r in plan.requests]
    assert times == sorted(times) and times[-1] < 40
    # 2000 arrivals expected; a Poisson count's standard deviation is about 45.
    assert abs(len(times) - 2000) < 200


def test_to_frame_columns():
    frame = build_plan(make_spec(num_requests=4, prompt_tokens=FixedLength(value=9))).to_frame()
    assert list(frame.columns) == ["index", "prompt_tokens", "output_tokens", "arrival_s"]
    assert frame["index"].tolist() == [0, 1, 2, 3]
    assert frame["prompt_tokens"].tolist() == [9, 9, 9, 9]
    assert str(frame["output_tokens"].dtype) == "int64"


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d.update(version=2), r"version: Input should be 1"),
        (lambda d: d["requests"][0].update(prompt_tokens=0), r"requests\.0\.prompt_tokens"),
        (lambda d: d["requests"].reverse(), r"requests: indices must be 0, 1, 2"),
        (lambda d: d.update(users=4), r"users: given exactly when arrival is closed"),
        (lambda d: d["requests"][1].update(arrival_s=None), r"arrival_s must be null exactly"),
    ],
)
def test_from_json_rejects_invalid_plans(mutate, pattern):
    data = json.loads(build_plan(make_spec(num_requests=3)).to_json())
    mutate(data)
    with pytest.raises(UsageError, match=f"^request plan: .*{pattern}"):
        RequestPlan.from_json(json.dumps(data))


def test_from_json_rejects_non_json():
    with pytest.raises(UsageError, match=r"^request plan: Invalid JSON"):
        RequestPlan.from_json(b"{not json")
