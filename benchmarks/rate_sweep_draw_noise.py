"""How much a rate sweep's knees and held rates move from the workload's draw alone, on paper.

The measured sweeps run on a machine whose speed moves from run to run, and each uses one
seed: every rate's plan is the same requests, gaps scaled by 1/rate, and the measured window
takes the ones that arrive in its 20 s. This replays whole sweeps without a server and at one
machine speed, to separate what the workload's draw and the grid's placement do from what the
machine does:

- the step cost is fitted on a measured sweep's engine steps (each server its own, as
  `harness.rate_sweep.predict` does) and held fixed;
- each rate's Poisson plan is scheduled by the simulator (`harness.analysis.gap.simulate_plan`,
  static with its max batch delay), read as a measured run's requests are
  (`harness.rate_sweep.point.latency_point`), and the sweep's own schedule
  (`harness.rate_sweep.schedule.RateSchedule`: systems leave, the grid grows, brackets
  are halved) decides the next rates; knee and held rate from `harness.rate_sweep.curve`;
- "placement": the workload's own seed, the grid set from continuous's burst rate times
  0.85-1.15 (measured burst rates moved that much between sweeps);
- "draw": seeds 0..N-1 at the simulated burst rate;
- each at several measured windows.

For each, per figure: the median, the largest deviation from it, and the share of three
sweeps drawn from the set (all triples) whose figures lie within ±10% of their own median:
the issue's acceptance test, with no machine noise in it.

    .venv/bin/python benchmarks/rate_sweep_draw_noise.py /work/runs/rates-23 --out benchmarks/results/X.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from harness.analysis.gap import simulate_plan
from harness.analysis.step_predict import fit_server_step_cost, runs_by_server
from harness.jobs.rate_sweep import (
    DEFAULT_SLO_E2E_P99_S,
    DEFAULT_SLO_TTFT_P50_S,
    DEFAULT_WORKLOAD,
    SATURATION_REQUESTS,
)
from harness.paper.step_cost import LinearStepCost
from harness.rate_sweep.curve import SloSeconds
from harness.rate_sweep.defaults import DEFAULT_FRACTIONS, EXTRA_RATES, REFINE_RUNS, WARMUP_S
from harness.rate_sweep.grid import burst_spec, rate_grid, rate_spec, saturation_rate
from harness.rate_sweep.point import RatePoint, RequestLatencies, latency_point
from harness.rate_sweep.result import SystemResult, system_result
from harness.rate_sweep.schedule import RateSchedule
from harness.rundir.reader import find_run_dirs, load_run
from harness.systems import SystemName
from harness.workload import WorkloadSpec, build_plan, load_spec
from launchers.spec import DEFAULT_BATCH_SIZE, ServerSpec

SYSTEMS = ("continuous", "static")
BATCH_SIZE = DEFAULT_BATCH_SIZE
# The sweep's own defaults: static's max batch delay is the launcher's.
STATIC_BATCH_WAIT_S = float(ServerSpec.model_fields["batch_wait_s"].default)
SLO = SloSeconds(DEFAULT_SLO_TTFT_P50_S, DEFAULT_SLO_E2E_P99_S)
TOLERANCE = 0.10


def fitted_costs(sweep: Path) -> dict[str, LinearStepCost]:
    """Each system's step cost, fitted on its server's runs in the measured sweep."""
    runs = [load_run(path, allow_partial=True) for path in find_run_dirs([sweep / "runs"])]
    return {members[0].manifest.system: fit_server_step_cost(members).fit.cost
            for members in runs_by_server(runs).values()}


def paper_point(spec: WorkloadSpec, system: str, rate: float, cost: LinearStepCost, measure_s: float) -> RatePoint:
    """One run on paper, read as a measured run's requests are."""
    plan = build_plan(rate_spec(spec, rate, WARMUP_S, measure_s))
    schedule = simulate_plan(plan.requests, BATCH_SIZE, cast(SystemName, system), cost,
                             static_batch_wait_s=STATIC_BATCH_WAIT_S)
    assert schedule is not None, "a Poisson plan has arrivals"
    arrivals = np.array([request.arrival_s for request in plan.requests], dtype=float)
    measured = arrivals >= WARMUP_S
    admitted = schedule.first_token_s - schedule.step_duration_s[schedule.admit_step]
    requests = RequestLatencies(
        arrival_s=arrivals[measured],
        ttft_s=(schedule.first_token_s - arrivals)[measured],
        e2e_s=(schedule.finish_s - arrivals)[measured],
        output_tokens=np.array([request.output_tokens for request in plan.requests], dtype=float)[measured],
        queue_wait_s=(admitted - arrivals)[measured],
    )
    return latency_point(system, rate, requests, measure_s, planned_rate=rate, sent_rate=rate, late_p99_s=0.0,
                         measured=int(measured.sum()), failed=0)


def burst_rate(spec: WorkloadSpec, cost: LinearStepCost) -> float:
    """Continuous's saturation on paper, read off its simulated burst as the sweep reads a measured one."""
    plan = build_plan(burst_spec(spec, SATURATION_REQUESTS))
    schedule = simulate_plan([request.model_copy(update={"arrival_s": 0.0}) for request in plan.requests],
                             BATCH_SIZE, "continuous", cost)
    assert schedule is not None, "a burst at t = 0 has arrivals"
    return saturation_rate(pd.DataFrame({"ok": True, "sent_s": 0.0, "end_s": schedule.finish_s}))


def paper_sweep(spec: WorkloadSpec, costs: dict[str, LinearStepCost], saturation: float,
                measure_s: float) -> dict[str, float]:
    """A whole sweep on paper under the sweep's schedule: each system's knee and held rate, and the ratios."""
    schedule = RateSchedule(rate_grid(saturation, DEFAULT_FRACTIONS), SYSTEMS, SLO, {}, EXTRA_RATES, REFINE_RUNS)
    points: list[RatePoint] = []
    while group := schedule.next_runs():
        for system, rate in group:
            points.append(paper_point(spec, system, rate, costs[system], measure_s))
            schedule.record(points)
    results = {system: system_result(system, saturation, [p for p in points if p.system == system], SLO)
               for system in SYSTEMS}
    return _figures(results)


def _figures(results: dict[str, SystemResult]) -> dict[str, float]:
    knee = {system: result.knee_rps if result.knee_rps is not None else math.nan for system, result in results.items()}
    held = {system: result.held.rate for system, result in results.items()}
    return {"continuous knee": knee["continuous"], "static knee": knee["static"],
            "continuous held": held["continuous"], "static held": held["static"],
            "held ratio": held["continuous"] / held["static"], "knee ratio": knee["continuous"] / knee["static"]}


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, largest relative deviation from it, and the share of triples within ±TOLERANCE of their median."""
    finite = [value for value in values if math.isfinite(value)]
    median = statistics.median(finite)
    triples = list(itertools.combinations(finite, 3))
    within = sum(max(abs(v / statistics.median(t) - 1) for v in t) <= TOLERANCE for t in triples)
    return {"median": median, "largest_deviation": max(abs(v / median - 1) for v in finite),
            "triples_within": within / len(triples) if triples else math.nan, "sweeps": len(finite)}


def spreads(sweeps: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each figure's spread over `sweeps`."""
    return {name: spread([sweep[name] for sweep in sweeps]) for name in sweeps[0]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="a measured sweep's report directory: its steps set the step costs")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--windows", default="20,30,40", help="measured seconds per run, comma-separated")
    parser.add_argument("--seeds", type=int, default=20, help="draws in the 'draw' scenario")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    costs = fitted_costs(args.sweep)
    spec = load_spec(args.workload)
    saturation = burst_rate(spec, costs["continuous"])
    factors = np.linspace(0.85, 1.15, 13)
    scenarios: dict[str, dict[str, dict[str, float]]] = {}
    for window in (float(value) for value in args.windows.split(",")):
        placement = spreads([paper_sweep(spec, costs, saturation * factor, window) for factor in factors])
        draw = spreads([paper_sweep(spec.model_copy(update={"seed": seed}), costs, saturation, window)
                        for seed in range(args.seeds)])
        scenarios[f"placement, {window:g} s"], scenarios[f"draw, {window:g} s"] = placement, draw
        for name, figures in (("placement", placement), ("draw", draw)):
            print(f"{name}, {window:g} s measured:")
            for figure, values in figures.items():
                print(f"  {figure:16s} median {values['median']:6.2f}  largest deviation"
                      f" {values['largest_deviation']:6.1%}  triples within ±10%: {values['triples_within']:6.1%}")
    found = {"sweep": str(args.sweep), "costs": {k: v.coefficients() for k, v in costs.items()},
             "burst_rate_on_paper": saturation, "scenarios": scenarios}
    args.out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
