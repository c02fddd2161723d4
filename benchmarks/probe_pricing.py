"""How well a job's probe prices its runs: the probe's own fit against the reference's step
costs at the machine's speed (harness.budget.probe), each run's plan simulated as the sizing does.

For every run of a `reproduce` report directory (its probe/ and runs/), the simulated
makespan under each pricing against the engine's measured makespan, then per system the
median error and its range.

    .venv/bin/python benchmarks/probe_pricing.py REPORT_DIR [REPORT_DIR ...]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from harness.analysis.engine import engine_metrics
from harness.analysis.step_predict import fit_server_step_cost
from harness.budget import MachineCost
from harness.budget.estimate import simulate_run
from harness.budget.probe import reference_pricing
from harness.rundir.reader import load_run
from harness.workload import RequestPlan


def pricings(report: Path) -> dict[str, MachineCost]:
    """The probe's own fit and the scaled reference, from the report's probe runs."""
    probes = {run.manifest.system: run for run in map(load_run, sorted((report / "probe").iterdir()))}
    own = {system: fit_server_step_cost([run]).fit.cost for system, run in probes.items()}
    continuous = probes["continuous"]
    batch_size = continuous.manifest.batch_size
    if continuous.steps is None:
        raise SystemExit(f"{report}: its continuous probe has no engine step log")
    server = continuous.manifest.server
    priced = reference_pricing(None if server is None else server.model_dump(), batch_size, continuous.steps, list(own))
    if priced is None:
        raise SystemExit(f"{report}: its servers are not the reference's (model, B, vLLM version)")
    ref, speed = priced
    print(f"{report}: machine speed x{speed:.3f} against the reference")
    return {name: MachineCost(costs["continuous"], batch_size, 0.0, system_step_costs={"static": costs["static"]})
            for name, costs in (("own fit", own), ("scaled reference", ref))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    args = parser.parse_args()
    for report in args.reports:
        machines = pricings(report)
        errors: dict[tuple[str, str], list[float]] = {}
        for directory in sorted((report / "runs").iterdir()):
            run = load_run(directory)
            if run.steps is None or run.plan is None:
                continue
            plan = RequestPlan.model_validate(run.plan)
            measured = engine_metrics(run.steps, run.manifest.batch_size).makespan_s
            for name, machine in machines.items():
                simulated = simulate_run(plan, run.manifest.system, machine)
                if simulated is not None:
                    errors.setdefault((name, run.manifest.system), []).append(simulated.makespan_s / measured - 1)
        for (name, system), values in errors.items():
            print(f"  {name:16} {system:10} median {statistics.median(values):+.1%}"
                  f" range {min(values):+.1%}..{max(values):+.1%} ({len(values)} runs)")


if __name__ == "__main__":
    main()
