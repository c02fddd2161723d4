"""A short probe of this machine and its servers, before a job's first run: the step costs
and the per-run overhead that the job's plan is estimated and sized with (harness.budget).

One small burst per server, on the widest spread of the job's workloads, made as an
ordinary run into the probe's own directory, then fitted as the report fits its runs
(harness.analysis.step_predict). Its fit errs low, so the plans it sizes run longer than
aimed at, never under the 20 s floor; a burst mixed from every workload fitted worse and
erred high (docs/validation/job-clock.md#the-default-job-measured).
A server without an engine step log (one we did not launch) gives no fit: no probe.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.engine import engine_metrics
from harness.analysis.step_cost_fit import StepCostFitError
from harness.analysis.step_predict import fit_server_step_cost
from harness.budget import MachineCost
from harness.rundir.reader import load_run
from harness.systems import Mode, SystemName
from harness.workload import WorkloadSpec, build_plan

if TYPE_CHECKING:
    from harness.sweep import SweepTarget

logger = logging.getLogger(__name__)

# Requests per probe run: with B = 16, three batches' worth, a burst's ramp down included.
PROBE_REQUESTS = 48
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
    from harness.sweep import SweepCell, iter_runs

    spec = max(specs, key=lambda workload: max(request.output_tokens for request in build_plan(workload).requests))
    probe = spec.model_copy(update={"name": f"probe-{spec.name}", "num_requests": PROBE_REQUESTS})
    cells = [SweepCell(PROBE_SYSTEM[mode], probe, target) for mode, target in targets.items()]
    logger.info(f"probing this machine: {PROBE_REQUESTS} requests of {spec.name} on each server")
    finished = list(iter_runs(cells, out_dir, repetitions=1))
    costs, overheads = {}, []
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
        overheads.append(max(run.seconds - engine_metrics(data.steps, batch_size).makespan_s, 0.0))
    # The continuous server's cost prices naive too (it serves naive's waves); static has its own server.
    machine = MachineCost(
        costs["continuous"], batch_size, statistics.median(overheads),
        system_step_costs={system: cost for system, cost in costs.items() if system != "continuous"},
    )
    return Probe(machine, sum(run.seconds for run in finished))
