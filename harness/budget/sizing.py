"""Plans sized so that a whole job fits a budget of minutes on this machine.

Every workload gets one request count, and every system of it runs the identical plan.
The count gives the workload's fastest system a run of T seconds, the same T for every
workload (as the CPU workloads were sized by hand): T is the largest that keeps the
job's estimate within the budget, and never under TARGET_RUN_S, aimed above MIN_RUN_S,
the shortest run a figure survives here. No budget means the smallest job that keeps every rule below. A budget
that cannot keep every workload is refused: dropping a spread would change the question
the job answers.

A burst's makespan grows almost linearly with its request count, so two simulations per
(workload, system), at the full plan and at half of it, give the line that the search
runs on; the chosen plans are then simulated exactly, and a count whose fastest run
still falls short of MIN_RUN_S is raised.

What shrinking costs: a burst ends in a tail where the last long requests run alone in a
nearly empty batch, and the tail is a larger share of a smaller plan; fewer requests
also sample the length distribution more coarsely. The step model predicts each headline
ratio at smaller and smaller plans against the full one: a workload's floor is the
smallest plan (in steps of a twentieth of the full one) above which no ratio moves by
more than MAX_RATIO_SHIFT, and no budget takes a plan below its floor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.analysis.cells import HEADLINE_RATIOS
from harness.analysis.health import MIN_MAKESPAN_S
from harness.budget.estimate import JobPlan, MachineCost, plan_job, simulate_run
from harness.errors import UsageError
from harness.paper.simulate import ScheduleResult
from harness.systems import SystemName
from harness.workload import WorkloadSpec, build_plan
from harness.workload.limits import MAX_REQUESTS

# The shortest run of the fastest system: shorter runs swing by tens of percent here.
MIN_RUN_S = MIN_MAKESPAN_S
# What sizing aims the fastest run at, so that it lasts MIN_RUN_S when measured: a run
# lasts what the machine's speed at the time makes of it, and that moves by ±10-17% from
# one run to the next here, beside the pricing's own error: a smaller margin left runs
# under MIN_RUN_S (docs/validation/job-clock.md#three-back-to-back-jobs-and-what-the-verdict-judges).
TARGET_RUN_S = MIN_RUN_S * 1.25
# A sized plan may move a headline ratio by at most this much against the full plan. The
# paired ratios' own noise between repetitions is about ±2%
# (docs/methodology.md#health-and-the-unstable-verdict): a plan that moves a ratio by more
# than that makes the measurement differ from the full one by more than the repetitions can.
MAX_RATIO_SHIFT = 0.02
# Correcting the line's count against the exact simulation converges in one or two tries
# (makespans are near linear in the count); this bounds a pathological plan.
_MAX_RAISES = 10


@dataclass(frozen=True)
class SizedWorkload:
    """One workload at its sized request count, against its full plan."""

    spec: WorkloadSpec
    full_requests: int
    fastest_run_s: float
    # Each headline ratio of total tok/s, predicted at the sized plan over at the full one, minus 1.
    ratio_shift: dict[str, float]


@dataclass(frozen=True)
class Sizing:
    """The workloads sized to a budget, and the job they make."""

    workloads: tuple[SizedWorkload, ...]
    job: JobPlan

    @property
    def specs(self) -> tuple[WorkloadSpec, ...]:
        """The sized workload specs, in the job's order."""
        return tuple(workload.spec for workload in self.workloads)


@dataclass(frozen=True)
class _Line:
    """A system's makespan on a workload as a line in the request count, and its full plan's schedule."""

    intercept_s: float
    per_request_s: float
    full: ScheduleResult

    def makespan_s(self, count: int) -> float:
        return self.intercept_s + self.per_request_s * count

    def count_for(self, seconds: float) -> int:
        """The fewest requests whose makespan reaches `seconds`."""
        return max(1, math.ceil((seconds - self.intercept_s) / self.per_request_s))


def size_for_budget(
    budget_min: float | None,
    specs: Sequence[WorkloadSpec],
    systems: Sequence[SystemName],
    repetitions: int,
    machine: MachineCost,
    before_s: float = 0.0,
    after_s: float = 0.0,
    *,
    min_run_s: float = TARGET_RUN_S,
    max_ratio_shift: float = MAX_RATIO_SHIFT,
) -> Sizing:
    """Choose each workload's request count so that the job's estimate fits `budget_min` minutes.

    `budget_min` None: every workload at its floor, the smallest job the rules allow.
    `before_s` and `after_s`: the job's time before its first run (servers) and after its
    last (the report). UsageError (one line) for a budget that is not a positive number of
    minutes, a workload sized by duration, or a budget too small for every workload at
    its floor: its fastest system's run at least `min_run_s`, and no headline ratio moved
    by more than `max_ratio_shift` against the full plan.
    """
    if budget_min is not None and not (math.isfinite(budget_min) and budget_min > 0):
        raise UsageError(f"budget: must be a positive number of minutes, got {budget_min!r}")
    specs = [_whole_trace(spec) for spec in specs]
    for spec in specs:
        if spec.num_requests is None:
            raise UsageError(f"{spec.name}: sized by duration_s; a budget sizes workloads by num_requests")
    lines = {spec.name: {system: _line(spec, system, machine) for system in systems} for spec in specs}
    # Every plan is also sized for runs of at least min_run_s (sized, estimate_s), so a floor holds the tail alone.
    # A trace is replayed whole: its floor is all of it.
    floors = {spec.name: spec.num_requests if spec.trace is not None and spec.num_requests
              else _faithful_floor(spec, lines[spec.name], systems, machine, min_run_s, max_ratio_shift)
              for spec in specs}

    def count(spec: WorkloadSpec, seconds: float) -> int:
        if spec.trace is not None:
            return floors[spec.name]
        return max(_count(lines[spec.name], seconds), floors[spec.name])

    def sized(seconds: float) -> list[SizedWorkload]:
        return [_sized(spec, count(spec, seconds), lines[spec.name], systems, machine, min_run_s) for spec in specs]

    def job(workloads: Sequence[SizedWorkload]) -> JobPlan:
        return plan_job([workload.spec for workload in workloads], systems, repetitions, machine, before_s, after_s)

    smallest = sized(min_run_s)
    if budget_min is None:
        return Sizing(tuple(smallest), job(smallest))
    budget_s = budget_min * 60.0
    need_s = job(smallest).total_s
    if need_s > budget_s:
        raise UsageError(
            f"budget of {budget_min:g} min: {len(specs)} workload(s) x {len(systems)} system(s) x {repetitions}"
            f" repetition(s) need about {need_s / 60:.1f} min on this machine, with every run of the fastest system"
            f" at least {min_run_s:.0f} s and every plan large enough to keep its headline ratios within"
            f" ±{max_ratio_shift:.0%} of the full plan's; give at least {math.ceil(need_s / 60)} min"
        )

    def estimate_s(seconds: float) -> float:
        runs_s = sum(line.makespan_s(count(spec, seconds)) + machine.run_overhead_s
                     for spec in specs for line in lines[spec.name].values())
        return before_s + after_s + repetitions * runs_s

    # The line ignores that runs end on whole steps and waves: shorten until the exact plans fit.
    target = _longest_fitting(estimate_s, budget_s, min_run_s)
    workloads = smallest
    for _ in range(_MAX_RAISES):
        candidate = sized(target)
        candidate_s = job(candidate).total_s
        if candidate_s <= budget_s:
            workloads = candidate
            break
        target = max(min_run_s, target * budget_s / candidate_s)
        if target <= min_run_s:
            break
    return Sizing(tuple(workloads), job(workloads))


def _whole_trace(spec: WorkloadSpec) -> WorkloadSpec:
    """A trace with its request count made explicit (every row of its window): sizing replays it whole."""
    if spec.trace is None or spec.num_requests is not None:
        return spec
    return spec.model_copy(update={"num_requests": len(build_plan(spec).requests)})


def _faithful_floor(spec: WorkloadSpec, lines: dict[SystemName, _Line], systems: Sequence[SystemName],
                    machine: MachineCost, min_run_s: float, max_ratio_shift: float) -> int:
    """The smallest count, on a grid of twentieths of the full plan, above which no headline
    ratio moves past `max_ratio_shift` and the fastest run stays at least `min_run_s`."""
    full = spec.num_requests
    assert full is not None, "size_for_budget refuses workloads sized by duration"
    step = max(1, full // 20)
    floor = full
    for count in range(full - step, 0, -step):
        schedules = {system: _schedule(spec, count, system, machine) for system in systems}
        if min(schedule.makespan_s for schedule in schedules.values()) < min_run_s:
            break
        if any(abs(shift) > max_ratio_shift for shift in _shifts(schedules, lines).values()):
            break
        floor = count
    return floor


def _line(spec: WorkloadSpec, system: SystemName, machine: MachineCost) -> _Line:
    full_count = spec.num_requests
    assert full_count is not None, "size_for_budget refuses workloads sized by duration"
    full = _schedule(spec, full_count, system, machine)
    half_count = max(full_count // 2, 1)
    if half_count == full_count:
        return _Line(0.0, full.makespan_s / full_count, full)
    half = _schedule(spec, half_count, system, machine)
    slope = (full.makespan_s - half.makespan_s) / (full_count - half_count)
    if slope <= 0:
        # No growth between the two plans (sampling noise on a tiny plan): proportional instead.
        return _Line(0.0, full.makespan_s / full_count, full)
    return _Line(full.makespan_s - slope * full_count, slope, full)


def _schedule(spec: WorkloadSpec, count: int, system: SystemName, machine: MachineCost) -> ScheduleResult:
    schedule = simulate_run(build_plan(spec.model_copy(update={"num_requests": count})), system, machine)
    assert schedule is not None, "a workload sized by request count has a schedule"
    return schedule


def _count(lines: dict[SystemName, _Line], seconds: float) -> int:
    """The fewest requests that give every system, the fastest included, a run of `seconds`."""
    return min(max(line.count_for(seconds) for line in lines.values()), MAX_REQUESTS)


def _longest_fitting(estimate_s: Callable[[float], float], budget_s: float, shortest_s: float) -> float:
    """The longest fastest-run length whose job estimate fits the budget (at least `shortest_s`)."""
    low, high = shortest_s, shortest_s
    while estimate_s(high) <= budget_s and high < shortest_s * 2**20:
        low, high = high, high * 2
    if estimate_s(high) <= budget_s:
        return high
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if estimate_s(middle) <= budget_s else (low, middle)
    return low


def _sized(spec: WorkloadSpec, count: int, lines: dict[SystemName, _Line], systems: Sequence[SystemName],
           machine: MachineCost, min_run_s: float) -> SizedWorkload:
    """`spec` at `count` requests, simulated, raised until its fastest run reaches `min_run_s`."""
    for _ in range(_MAX_RAISES):
        schedules = {system: _schedule(spec, count, system, machine) for system in systems}
        fastest = min(schedule.makespan_s for schedule in schedules.values())
        if fastest >= min_run_s or count >= MAX_REQUESTS:
            break
        count = min(max(count + 1, math.ceil(count * min_run_s / fastest)), MAX_REQUESTS)
    full_requests = spec.num_requests
    assert full_requests is not None, "size_for_budget refuses workloads sized by duration"
    return SizedWorkload(spec.model_copy(update={"num_requests": count}), full_requests, fastest,
                         _shifts(schedules, lines))


def _shifts(schedules: dict[SystemName, ScheduleResult], lines: dict[SystemName, _Line]) -> dict[str, float]:
    """Each headline ratio of total tok/s at these schedules over at the full plan's, minus 1."""
    return {
        f"{top}/{bottom}": _ratio(schedules[top], schedules[bottom]) / _ratio(lines[top].full, lines[bottom].full) - 1
        for top, bottom in HEADLINE_RATIOS if top in schedules and bottom in schedules
    }


def _ratio(top: ScheduleResult, bottom: ScheduleResult) -> float:
    return top.total_tokens_per_s / bottom.total_tokens_per_s
