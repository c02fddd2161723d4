"""A short probe of this machine and its servers, before a job's first run: the step costs
and the per-run overhead that the job's plan is estimated and sized with (`estimate`, `sizing` beside it).

One small burst per server, on the widest spread of the job's workloads, made as an
ordinary run into the probe's own directory, then fitted as the report fits its runs
(harness.analysis.step_predict). A burst of one spread prices the other spreads poorly, in
either direction from one day to the next, and a burst mixed from every spread fitted worse
still (docs/validation/job-clock.md). So where the servers run what the committed reference
reproduction ran (its model, B and vLLM version), the plans are priced with the
reference's step costs, fitted on all of its runs, at this machine's speed: one factor,
the continuous probe's busy time over what the reference's cost makes of its steps.
A server without an engine step log (one we did not launch) gives no fit: no probe.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.engine import engine_metrics
from harness.analysis.speed import machine_speed
from harness.analysis.step_cost_fit import StepCostFitError
from harness.analysis.step_predict import fit_server_step_cost
from harness.budget import MachineCost
from harness.paper.step_cost import LinearStepCost
from harness.reference import packaged_reference, same_setup
from harness.rundir.reader import load_run
from harness.systems import VLLM_SERVER_MODE, Mode, SystemName
from harness.workload import WorkloadSpec, build_plan

if TYPE_CHECKING:
    from harness.sweep.servers import SweepTarget

logger = logging.getLogger(__name__)

# Batches of B requests per probe run: three, a burst's ramp down included.
PROBE_BATCHES = 3
# Which system probes each server: the one whose steps the server mostly runs.
PROBE_SYSTEM: dict[Mode, SystemName] = {"continuous": "continuous", "static": "static"}


@dataclass(frozen=True)
class Probe:
    """What the probe measured: the machine's costs, and how long the probe itself took."""

    machine: MachineCost
    seconds: float


def probe_machine(
    targets: Mapping[Mode, SweepTarget], specs: Sequence[WorkloadSpec], out_dir: Path, batch_size: int
) -> Probe | None:
    """Probe every server in `targets` with a small burst; None when a server's steps cannot be fitted.

    The probe's runs go under `out_dir`, apart from the job's runs: they are not measurements.
    """
    # Here, not at the top: the load driver gevent-patches the process that imports it.
    from harness.sweep.runs import SweepCell, iter_runs

    spec = max(specs, key=lambda workload: max(request.output_tokens for request in build_plan(workload).requests))
    requests = PROBE_BATCHES * batch_size
    probe = spec.model_copy(update={"name": f"probe-{spec.name}", "num_requests": requests})
    cells = [SweepCell(PROBE_SYSTEM[mode], probe, target) for mode, target in targets.items()]
    logger.info(f"probing this machine: {requests} requests of {spec.name} on each server")
    finished = list(iter_runs(cells, out_dir, repetitions=1))
    costs, overheads, steps = {}, [], {}
    for run in finished:
        data = load_run(run.path)
        if data.steps is None or data.steps.empty:
            logger.info(f"no probe: {data.manifest.run_id} has no engine step log (a server we did not launch)")
            return None
        try:
            costs[data.manifest.system] = fit_server_step_cost([data]).fit.cost
        except StepCostFitError as error:
            logger.info(f"no probe: the steps of {data.manifest.run_id} could not be fitted ({error})")
            return None
        steps[data.manifest.system] = data.steps
        overheads.append(max(run.seconds - engine_metrics(data.steps, batch_size).makespan_s, 0.0))
    # The continuous server is always probed: its cost prices continuous and naive.
    priced = reference_pricing(targets["continuous"].server, batch_size, steps["continuous"], list(costs))
    if priced is not None:
        costs, speed = priced
        logger.info(f"pricing the plans with the reference's step costs at this machine's speed: x{speed:.2f}")
    # The continuous server's cost prices naive too (it serves naive's waves); static has its own server.
    machine = MachineCost(
        costs["continuous"], batch_size, statistics.median(overheads),
        system_step_costs={system: cost for system, cost in costs.items() if system != "continuous"},
    )
    return Probe(machine, sum(run.seconds for run in finished))


def reference_pricing(server: Mapping[str, Any] | None, batch_size: int, continuous_steps: pd.DataFrame,
                      systems: Sequence[SystemName]) -> tuple[dict[SystemName, LinearStepCost], float] | None:
    """Each system's step cost from the reference at this machine's speed, and that speed.

    None when `server` does not run the reference's model, B and vLLM version: the probe's
    own fit prices the job then.
    """
    reference = reference_step_costs(server, batch_size)
    if reference is None:
        return None
    speed = machine_speed(continuous_steps, reference["continuous"])
    return {system: reference[VLLM_SERVER_MODE[system]].scaled(speed) for system in systems}, speed


def reference_step_costs(server: Mapping[str, Any] | None, batch_size: int,
                         reference: Mapping[str, Any] | None = None) -> dict[Mode, LinearStepCost] | None:
    """The reference's step cost per server mode, when `server` runs its model at its B and vLLM version; else None.

    `reference`: the figures to price with (default: the packaged ones, harness.reference).
    """
    reference = packaged_reference() if reference is None else reference
    if not same_setup(reference, server, batch_size):
        return None
    costs = summary_step_costs(reference)
    return costs if {"continuous", "static"} <= costs.keys() else None


def summary_step_costs(summary: Mapping[str, Any]) -> dict[Mode, LinearStepCost]:
    """The step cost fitted on each server of a report, from its summary.json (`step_models`)."""
    names = [field.name for field in fields(LinearStepCost)]
    costs: dict[Mode, LinearStepCost] = {}
    for model in summary.get("step_models", []):
        mode: Mode = "static" if model["server"].startswith("static") else "continuous"
        # A reference fitted before steps recorded their prefill pairs has no pair term: 0.
        costs[mode] = LinearStepCost(*(model.get(name, 0.0) for name in names))
    return costs


