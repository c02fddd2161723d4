"""Each run's estimated duration, and the job's runs in the order a sweep makes them."""

from __future__ import annotations

import pytest

from harness.budget import MachineCost, plan_job
from harness.systems import SYSTEMS


def test_a_run_lasts_its_simulated_makespan_plus_the_overhead(machine, fixed_workload):
    # 32 requests of 100 tokens in 16 rows: two rounds of 100 steps of 10 ms.
    (run,) = plan_job([fixed_workload(num_requests=32)], ("continuous",), 1, machine).runs
    assert run.makespan_s == pytest.approx(2.0)
    assert run.seconds == pytest.approx(4.0)
    assert run.num_requests == 32


def test_naive_waves_wait_for_the_client_between_them(ten_ms, fixed_workload):
    machine = MachineCost(ten_ms, batch_size=16, run_overhead_s=0.0, wave_gap_s=0.5)
    runs = plan_job([fixed_workload(num_requests=48)], SYSTEMS, 1, machine).runs
    assert {run.system: run.makespan_s for run in runs} == pytest.approx(
        {"continuous": 3.0, "static": 3.0, "naive": 3.0 + 2 * 0.5})


def test_the_job_runs_every_workload_on_every_system_per_repetition(machine, fixed_workload):
    job = plan_job([fixed_workload("a"), fixed_workload("b", num_requests=16)], SYSTEMS, 2, machine,
                   before_s=60.0, after_s=30.0)
    assert [(run.repetition, run.workload, run.system) for run in job.runs] == [
        (rep, workload, system) for rep in (1, 2) for workload in ("a", "b") for system in SYSTEMS
    ]
    # a: 2 s + 2 s overhead per run; b: 1 s + 2 s.
    assert job.total_s == pytest.approx(60.0 + 2 * 3 * (4.0 + 3.0) + 30.0)


def test_a_closed_loop_runs_like_a_burst_into_as_many_rows_as_users(machine, fixed_workload):
    workload = fixed_workload(num_requests=8, output_tokens=10, arrival={"kind": "closed", "users": 4})
    (run,) = plan_job([workload], ("continuous",), 1, machine).runs
    assert run.makespan_s == pytest.approx(2 * 10 * 0.01)


def test_a_workload_sized_by_duration_lasts_its_duration(machine, fixed_workload):
    workload = fixed_workload(num_requests=None, duration_s=30.0, arrival={"kind": "poisson", "rate": 2.0})
    (run,) = plan_job([workload], ("static",), 1, machine).runs
    assert run.makespan_s == 30.0 and run.seconds == 32.0 and run.num_requests is None


@pytest.mark.parametrize("field", ["run_overhead_s", "wave_gap_s"])
def test_a_negative_overhead_is_refused(field, ten_ms):
    with pytest.raises(ValueError, match=field):
        MachineCost(ten_ms, 16, **{"run_overhead_s": 1.0, field: -1.0})


def test_a_system_without_engine_steps_is_priced_as_its_stand_in(machine, fixed_workload):
    systems = ("continuous", "hf-continuous", "hf-sequential")
    stand_ins = {"hf-continuous": "continuous", "hf-sequential": "continuous"}
    runs = plan_job([fixed_workload(num_requests=32)], systems, 1, machine, stand_ins=stand_ins).runs
    assert [run.system for run in runs] == list(systems)
    assert [run.makespan_s for run in runs] == pytest.approx([2.0, 2.0, 2.0])
