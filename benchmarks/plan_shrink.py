"""What shrinking a workload's plan costs: each headline ratio, as the schedule simulator
predicts it, at smaller and smaller plans against the full plan, and the floor that
`reproduce` sizes to by default.

The step costs are those fitted on a report's engine steps (its summary.json
`step_models`: the continuous server's for continuous and naive, the static server's
for static); `--slower` multiplies them, as on a machine that many times slower per step.

    .venv/bin/python benchmarks/plan_shrink.py [--report reports/reference-cpu] [--slower 1]

Prints, per workload, the fastest system's run and each ratio's shift at each twentieth of
the full plan, then the default sizing (harness.budget.size_for_budget with no budget).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.budget import MachineCost, size_for_budget
from harness.budget.estimate import simulate_run
from harness.budget.probe import summary_step_costs
from harness.jobs.reproduce import CPU_WORKLOADS, DEFAULT_REPETITIONS
from harness.systems import SYSTEMS
from harness.workload import build_plan, load_specs

ROOT = Path(__file__).resolve().parent.parent


def machine_from(report: Path, slower: float) -> MachineCost:
    """The machine a report's fitted step costs describe, `slower` times slower per step."""
    summary = json.loads((report / "summary.json").read_text())
    costs = {mode: cost.scaled(slower) for mode, cost in summary_step_costs(summary).items()}
    wave_gap_s = next(m["wave_gap_s"] for m in summary["step_models"] if m["server"].startswith("continuous"))
    return MachineCost(costs["continuous"], 16, 1.0, wave_gap_s * slower, {"static": costs["static"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "reference-cpu")
    parser.add_argument("--slower", type=float, default=1.0)
    args = parser.parse_args()
    machine = machine_from(args.report, args.slower)
    specs = load_specs(CPU_WORKLOADS)
    for spec in specs:
        full = spec.num_requests
        assert full is not None
        print(f"{spec.name} (full plan {full} requests)")
        print("  requests  fastest run s  continuous/static  continuous/naive")
        base = None
        for count in range(full, 0, -max(1, full // 20)):
            plan = build_plan(spec.model_copy(update={"num_requests": count}))
            schedules = {system: simulate_run(plan, system, machine) for system in SYSTEMS}
            tok_s = {system: schedule.total_tokens_per_s for system, schedule in schedules.items() if schedule}
            fastest = min(schedule.makespan_s for schedule in schedules.values() if schedule)
            ratios = (tok_s["continuous"] / tok_s["static"], tok_s["continuous"] / tok_s["naive"])
            base = base or ratios
            shifts = [ratio / first - 1 for ratio, first in zip(ratios, base, strict=True)]
            print(f"  {count:8d}  {fastest:13.1f}  {shifts[0]:+17.1%}  {shifts[1]:+16.1%}")
    sizing = size_for_budget(None, specs, SYSTEMS, DEFAULT_REPETITIONS, machine)
    print(f"default sizing ({args.slower:g}x the report's step cost): about {sizing.job.total_s / 60:.1f} min of runs")
    for workload in sizing.workloads:
        print(f"  {workload.spec.name}: {workload.spec.num_requests} of {workload.full_requests} requests, fastest"
              f" run {workload.fastest_run_s:.1f} s, shifts "
              + ", ".join(f"{name} {shift:+.1%}" for name, shift in workload.ratio_shift.items()))


if __name__ == "__main__":
    main()
