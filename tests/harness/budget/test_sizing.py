"""Plans sized to a budget: counted by hand on fixed lengths, and on the CPU workloads with a
step cost fitted on the reference sweep's engine steps."""

from __future__ import annotations

import math

import pytest

from harness.budget import MachineCost, size_for_budget
from harness.errors import UsageError
from harness.paper.step_cost import LinearStepCost
from harness.systems import SYSTEMS
from harness.workload import load_specs

# With 10 ms steps, 16 rows and 100-token outputs every wave of 16 requests takes 1 s for
# every system, and a run 2 s more: 3 systems x 3 repetitions cost 9 x (waves + 2) s.


def job_s(waves):
    return 9 * (waves + 2.0)


def counts(sizing):
    return {(run.workload, run.system): run.num_requests for run in sizing.job.runs}


def test_the_longest_plans_that_fit_the_budget(machine, fixed_workload):
    sizing = size_for_budget(5.0, [fixed_workload(num_requests=640)], SYSTEMS, 3, machine)
    (workload,) = sizing.workloads
    waves = math.ceil(workload.spec.num_requests / 16)
    assert sizing.job.total_s == pytest.approx(job_s(waves))
    assert job_s(waves) <= 300.0 < job_s(waves + 1)
    assert workload.fastest_run_s == pytest.approx(waves)
    # Every system of the workload runs the same plan, every repetition.
    assert set(counts(sizing).values()) == {workload.spec.num_requests}


def test_a_large_budget_grows_the_plans_past_the_workload_s_own(machine, fixed_workload):
    sizing = size_for_budget(10.0, [fixed_workload(num_requests=640)], SYSTEMS, 3, machine)
    assert sizing.specs[0].num_requests > 640 and sizing.job.total_s <= 600.0


def test_every_workload_s_fastest_run_gets_the_same_length(machine, fixed_workload):
    # Outputs of 50 tokens make waves of 0.5 s: that workload needs twice the requests.
    workloads = [fixed_workload("long", num_requests=640), fixed_workload("short", num_requests=640, output_tokens=50)]
    sizing = size_for_budget(10.0, workloads, SYSTEMS, 3, machine)
    long, short = sizing.workloads
    assert abs(long.fastest_run_s - short.fastest_run_s) <= 1.0
    assert short.spec.num_requests == pytest.approx(2 * long.spec.num_requests, abs=32)


def test_a_budget_too_small_for_twenty_second_runs_is_refused_in_one_line(machine, fixed_workload):
    # 26 waves of 16 for the shortest run of 25 s (20 s and a margin): 9 x 28 s = 4.2 min.
    with pytest.raises(UsageError) as refused:
        size_for_budget(3.0, [fixed_workload(num_requests=640)], SYSTEMS, 3, machine)
    assert str(refused.value) == (
        "budget of 3 min: 1 workload(s) x 3 system(s) x 3 repetition(s) need about 4.2 min on this machine, with every"
        " run of the fastest system at least 25 s and every plan large enough to keep its headline ratios within ±2%"
        " of the full plan's; give at least 5 min")


def test_no_budget_is_the_smallest_job_the_rules_allow(machine, fixed_workload):
    # Fixed lengths have no tail to weigh: the floor is the 26 waves a run of 25 s needs.
    sizing = size_for_budget(None, [fixed_workload(num_requests=640)], SYSTEMS, 3, machine)
    assert sizing.specs[0].num_requests == 416 and sizing.job.total_s == pytest.approx(job_s(26))


@pytest.mark.parametrize("budget", [0.0, -5.0, math.nan, math.inf])
def test_a_budget_must_be_a_positive_number_of_minutes(machine, fixed_workload, budget):
    with pytest.raises(UsageError, match="budget: must be a positive number of minutes"):
        size_for_budget(budget, [fixed_workload()], SYSTEMS, 3, machine)


def test_a_workload_sized_by_duration_is_refused(machine, fixed_workload):
    workload = fixed_workload("timed", num_requests=None, duration_s=30.0, arrival={"kind": "poisson", "rate": 2.0})
    with pytest.raises(UsageError, match="timed: sized by duration_s"):
        size_for_budget(30.0, [workload], SYSTEMS, 3, machine)


# The continuous server's step cost fitted on the reference sweep (reports/reference-cpu/summary.json),
# and the same 2.4x slower per step, as on the slowest machine the job has met.
REFERENCE = (0.006139, 0.00023, 7.25e-05, 2.51e-07)
CPU_WORKLOADS = ("cpu-anyscale-cap32", "cpu-anyscale-cap128", "cpu-anyscale-cap512", "cpu-anyscale-cap1536")


def cpu_machine(slower=1.0):
    return MachineCost(LinearStepCost(*(value * slower for value in REFERENCE)), batch_size=16, run_overhead_s=4.0,
                       wave_gap_s=0.0296)


def test_the_cpu_sweep_at_thirty_minutes_keeps_every_spread_and_its_ratios():
    sizing = size_for_budget(30.0, load_specs(CPU_WORKLOADS), SYSTEMS, 3, cpu_machine(), before_s=60.0, after_s=30.0)
    assert [spec.name for spec in sizing.specs] == list(CPU_WORKLOADS)
    assert sizing.job.total_s <= 30 * 60
    for workload in sizing.workloads:
        assert workload.fastest_run_s >= 20.0
        assert all(abs(shift) <= 0.02 for shift in workload.ratio_shift.values()), workload


def test_the_cpu_sweep_s_smallest_job_keeps_every_ratio_within_two_percent_of_the_full_plans():
    sizing = size_for_budget(None, load_specs(CPU_WORKLOADS), SYSTEMS, 3, cpu_machine(), before_s=60.0, after_s=30.0)
    assert [spec.name for spec in sizing.specs] == list(CPU_WORKLOADS)
    for workload in sizing.workloads:
        assert 25.0 <= workload.fastest_run_s < 27.0
        assert all(abs(shift) <= 0.02 for shift in workload.ratio_shift.values()), workload
    assert 25 * 60 < sizing.job.total_s < 29 * 60


def test_on_a_slower_machine_the_wide_spreads_keep_more_of_their_plans_than_25_s_runs_need():
    # Their tail weighs: a plan that would last 25 s there moves continuous/static by over 2%.
    sizing = size_for_budget(None, load_specs(CPU_WORKLOADS), SYSTEMS, 3, cpu_machine(2.4))
    cap32, _, cap512, cap1536 = sizing.workloads
    assert cap32.fastest_run_s < 30.0 and min(cap512.fastest_run_s, cap1536.fastest_run_s) > 50.0
    assert all(abs(shift) <= 0.02 for workload in sizing.workloads for shift in workload.ratio_shift.values())


def test_a_budget_that_would_take_plans_below_their_floor_is_refused():
    # On a machine 2.4x slower per step, the floors alone take over 40 minutes.
    with pytest.raises(UsageError, match=r"need about 4\d\.\d min on this machine, with every run of the fastest"
                                         r" system at least 25 s and every plan large enough to keep its headline"
                                         r" ratios within ±2%"):
        size_for_budget(25.0, load_specs(CPU_WORKLOADS), SYSTEMS, 3, cpu_machine(2.4), before_s=200.0, after_s=30.0)
