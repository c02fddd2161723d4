"""The reproduction: the Anyscale-style sweep end to end, and its report.

One server start per mode, one after the other, both up for the whole sweep: the
continuous server hosts the continuous runs and the naive padded waves, the static server
the static runs, and every repetition runs each workload on all three systems back to
back. Before the first run a probe of each server (harness.budget.probe) prices this
machine's steps; the plans are sized from it (harness.budget), and every progress line says
where the job stands and when it should end. A report is written after every repetition, and
after Ctrl-C. There is no separate calibration phase: the predictions come from step costs
fitted on the runs' own engine steps (harness.analysis.step_predict).

`transformers`: also start `transformers serve` in its two modes and run every workload
on them too (hf-continuous, hf-sequential), with the same plans, into the same report.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import UsageError
from harness.jobs.batches import SystemBatches, preset_batches, uniform_batches
from harness.jobs.fields import MAX_REPETITIONS, WORKERS_HELP, BudgetMinutes, OutDir, Positive, Workers, WorkloadNames
from harness.jobs.presets import PresetName, find_preset
from harness.jobs.stages import Interruption, default_out
from harness.systems import HF_SYSTEMS, SERVER_MODE, SYSTEMS, Mode, ServerMode, SystemName, modes_for
from launchers import Endpoints, ServerConfig
from launchers.kinds import kind_of

if TYPE_CHECKING:
    from harness.budget import JobPlan
    from harness.report.assemble import AssembledReport
    from harness.sweep.runs import SweepCell
    from harness.sweep.servers import SweepTarget
    from harness.workload import WorkloadSpec

logger = logging.getLogger(__name__)

# The four spread levels. The seed example (cpu-seed-100-200-300-1000) is left out of
# the default to keep the job shorter (the four alone take about 20 minutes at their
# smallest faithful plans: docs/validation/job-clock.md); add it by name.
CPU_WORKLOADS = (
    "cpu-anyscale-cap32",
    "cpu-anyscale-cap128",
    "cpu-anyscale-cap512",
    "cpu-anyscale-cap1536",
)
DEFAULT_REPETITIONS = 3
# A smoke run: one repetition of two batches per workload (seconds per cell, not 20+).
QUICK_BATCHES = 2
# Analysing and rendering a report takes 4-10 s here (one repetition to all 36 runs): one per repetition.
REPORT_S = 8.0
CAVEATS = (
    "The CPU default serves a 4-layer Llama with hidden size 256 on one core. Unlike an 8B model on a GPU, its"
    " decode step is not dominated by reading weights, so a step of 16 sequences costs several times a step of"
    " one: batching is far from free here, and every gap is smaller than Anyscale's. The step-cost model shows"
    " by how much.",
    "Naive static batching is emulated by the client: waves of B requests, each row asked for the wave's longest"
    " output (padding), the next wave only after the whole wave finished, on the continuous server. Only each"
    " request's planned tokens count as useful.",
    "Static batching is vLLM's own engine with one change, admission (a --scheduler-cls plugin): a batch forms only"
    " when the previous one has drained. Finished rows stop costing compute but their slots stay empty.",
    "Client and server share two cores: the load driver's own CPU time slows the server a little, the same for"
    " every system.",
    "Predictions replay each run's plan as sent at once (burst). When the client sends late (send lateness),"
    " the engine waits with free rows and nothing queued, which no fitted step cost predicts: such runs measure slower"
    " than predicted, by about the share of time the engine sat starved.",
    "On the CPU default, vLLM's API server shares one core with the engine. With 64 streams open it coalesces"
    " tokens into fewer chunks (per-token timestamps then repeat; TPOT and ITL medians can fall near zero for"
    " short requests), and it answers /metrics late, so telemetry has gaps of seconds. Throughput, which is"
    " tokens per makespan, is not affected; the occupancy plot is coarser where the gaps are.",
)

# The experiment on a server batchbench did not launch: its own batching, static batching and naive's padded waves
# both kept by the client.
ATTACHED_SYSTEMS: tuple[SystemName, ...] = ("continuous", "client-static", "naive")
ATTACHED_CAVEAT = (
    "The server was given by --endpoint, not launched here: it has no static mode and no engine step log here."
    " Static batching is kept by the client (client-static): waves of B requests, unpadded, each sent once the"
    " previous one has ended, so a server with at least B slots runs the static schedule whatever its own scheduler"
    " is (docs/validation/client-static.md). Every figure is the client's: nothing is predicted, and no ratio is"
    " re-priced at one machine speed."
)

TRANSFORMERS_CAVEAT = (
    "hf-continuous and hf-sequential are Hugging Face's `transformers serve`, a second server. Its continuous"
    " batching has no cap of B sequences per step: on a CPU the launcher gives each step 512 tokens and the cache"
    " and attention masks 2 GiB (transformers' defaults, 8,192 tokens and 90% of memory, stall a burst here)."
    " Its sequential mode serves one request at a time. It records no engine steps: its figures are the"
    " client's, and it is not predicted."
)


def quick_requests(batch_size: int) -> int:
    """Requests per workload of a smoke run at B = `batch_size`."""
    return QUICK_BATCHES * batch_size


class Reproduction(BaseModel):
    """What one reproduction runs: its settings, their defaults and ranges (the command's flags come from here)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workloads: WorkloadNames = Field(
        CPU_WORKLOADS, description="comma-separated workload files or names"
    )
    repetitions: Positive = Field(
        DEFAULT_REPETITIONS, le=MAX_REPETITIONS,
        description="runs per system and workload, interleaved, for the median and its 95% interval",
    )
    budget_min: BudgetMinutes | None = Field(
        None, description="size every workload's plan so that the whole job takes about this many minutes on this"
        " machine (default: the smallest job whose fastest runs last 20 s and whose plans keep the ratios of the"
        " full ones; a budget below that is refused)",
    )
    full_size: bool = Field(
        False, description="run every workload at its own request count, whatever it costs (the reference report's"
        " plans)",
    )
    quick: bool = Field(
        False, description=f"smoke run: 1 repetition of {QUICK_BATCHES} batches (B requests each) per workload; exit"
        " 0 when every request completed; the report says it is not a measurement",
    )
    transformers: bool = Field(
        False, description="also run Hugging Face's `transformers serve` on every workload, in its two modes:"
        " hf-continuous (its own continuous batching) and hf-sequential (one request at a time); the report shows"
        " them beside vLLM's",
    )
    preset: PresetName | None = Field(
        None, description="a published setup: anyscale-2023 is Anyscale's 2023 experiment (OPT-13B, 1,000 prompts"
        " of 512 tokens at caps 32/128/512/1536, full size), continuous at --max-num-seqs or vLLM's own default B,"
        " static and naive at 16/12/8/4 (docs/gpu.md); --model, --workloads, --quick override it",
    )
    out: OutDir | None = Field(None, description="report directory (default: reports/<date>-<host>)")
    workers: Workers = Field(1, description=WORKERS_HELP)
    # Whether --max-num-seqs was given: with a preset, continuous otherwise runs at vLLM's own default B.
    batch_given: bool = Field(True, json_schema_extra={"cli": False})
    # The results history the runs are appended to; None: none (the command's --no-history).
    history: Path | None = Field(None, json_schema_extra={"cli": False})

    def check(self, endpoints: Endpoints, server: ServerConfig) -> None:
        """Refuse settings that contradict each other or cannot be met, before anything starts."""
        chosen = [flag for flag, given in (("--budget-min", self.budget_min is not None),
                                           ("--full-size", self.full_size), ("--quick", self.quick)) if given]
        if len(chosen) > 1:
            raise UsageError(f"{' and '.join(chosen)}: choose one way to size the plans")
        if self.budget_min is not None and endpoints.continuous:
            raise UsageError("--budget-min: sizing needs the engine's step log, which only servers launched here"
                             " have; drop --endpoint or --budget-min")
        if self.budget_min is not None and self.transformers:
            raise UsageError("--budget-min: a budget prices vLLM's engine steps, and transformers serve records"
                             " none; drop --transformers or --budget-min")
        if self.transformers and endpoints.continuous:
            raise UsageError("--transformers launches its servers here: drop --endpoint, or run the transformers"
                             " endpoint with `batchbench run --backend transformers`")
        if self.preset is not None:
            self._check_preset(endpoints)
        if self.transformers:
            from launchers.transformers_server import check_servable

            check_servable(server.model)

    def _check_preset(self, endpoints: Endpoints) -> None:
        """A preset launches a static server per B and runs vLLM's three systems."""
        if endpoints.continuous:
            raise UsageError(f"--preset {self.preset}: static runs at a B per workload, a server launched here for"
                             " each: drop --endpoint")
        if self.transformers:
            raise UsageError(f"--preset {self.preset}: the published experiment's three systems; drop --transformers")
        if self.budget_min is not None:
            raise UsageError(f"--preset {self.preset}: --budget-min sizes plans from a probe of one static server,"
                             " and the preset starts one per B: use the full size or --quick")

    def systems_on(self, endpoints: Endpoints) -> tuple[SystemName, ...]:
        """vLLM's three systems, and transformers serve's two with `transformers`; on a continuous endpoint given
        without a static one, static batching kept by the client (client-static) in static's place."""
        if endpoints.continuous and not endpoints.static:
            return ATTACHED_SYSTEMS
        return SYSTEMS + HF_SYSTEMS if self.transformers else SYSTEMS


@dataclass(frozen=True)
class ReproductionResult:
    """How a reproduction ended: its report (None: interrupted before any run finished) and why it stopped."""

    report: AssembledReport | None
    # "stopped by Ctrl-C after ..."; None when every run was made.
    stopped: str | None
    runs: int
    minutes: float


def reproduce(job: Reproduction, server: ServerConfig, endpoints: Endpoints) -> ReproductionResult:
    """Run the reproduction on `server` (launched) or `endpoints`, write its report, append it to the history.

    Drives load: the process must be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched
    from harness.workload import load_specs

    require_patched("harness.jobs.reproduce")
    # Bad input is refused before the load, report and history code is imported (seconds).
    job.check(endpoints, server)
    out = job.out or default_out()
    specs = load_specs(list(job.workloads))
    systems = job.systems_on(endpoints)
    conversations = [spec.name for spec in specs if spec.trace is not None and spec.trace.conversation is not None]
    if conversations and "naive" in systems:
        raise UsageError(f"{', '.join(conversations)}: a conversation cannot be sent in naive's padded waves, which"
                         " reproduce runs: replay it with `batchbench run --system continuous` and `--system static`")

    from harness.budget import JobClock
    from harness.driver.distributed.shard import cluster_spec
    from harness.driver.runner import require_new_dir
    from harness.history import HistoryStore
    from harness.history.record import record
    from harness.report.assemble import JobStage, assemble_report
    from harness.sweep.relay import placement_caveat
    from harness.sweep.runs import check_sweep_workers, iter_runs

    began = time.monotonic()
    batches = system_batches(job, server, [spec.name for spec in specs])
    server = server.model_copy(update={"max_num_seqs": batches.continuous})
    logger.info(batches.line([spec.name for spec in specs]))
    repetitions = 1 if job.quick else job.repetitions
    if job.quick:
        specs = [spec.model_copy(update={"num_requests": min(spec.num_requests or quick, quick)})
                 for spec in specs for quick in (quick_requests(batches.wave(spec.name)),)]
    cluster = cluster_spec(job.workers)
    for wave, group in batches.wave_groups([spec.name for spec in specs]):
        check_sweep_workers([spec for spec in specs if spec.name in group], systems, wave, cluster)
    require_new_dir(out, "report directory")
    store = None if job.history is None else HistoryStore(job.history)
    runs_dir = out / "runs"

    skipped = []
    if endpoints.continuous and not endpoints.static:
        skipped.append(ATTACHED_CAVEAT)
    if job.transformers:
        skipped.append(TRANSFORMERS_CAVEAT)
    if not batches.uniform:
        skipped.append(batches_caveat(batches, [spec.name for spec in specs]))
    finished: list[Path] = []
    interruption = Interruption()

    def write(stage: JobStage | None) -> AssembledReport:
        placed = placement_caveat(finished)
        return assemble_report(finished, out, caveats=[*CAVEATS, *skipped, *([placed] if placed else [])],
                               smoke=job.quick, allow_partial=True, stage=stage)

    with contextlib.ExitStack() as stack:
        staged = not batches.uniform
        clock = JobClock(None, len(specs) * len(systems) * repetitions)
        with interruption.catch(lambda: f"stopped by Ctrl-C after {len(finished)} of {clock.total_runs} runs"):
            for cells, plan in _stages(job, systems, server, batches, specs, endpoints, out, stack, repetitions):
                if plan is not None:
                    clock.replan(plan)
                elif not staged:
                    clock.total_runs = len(cells) * repetitions
                # Per workload the three systems back to back, so each repetition's ratios compare
                # runs minutes apart at most.
                for made in iter_runs(cells, runs_dir, repetitions, cluster=cluster, note=clock.note):
                    finished.append(made.path)
                    clock.run_done()
                    # A preliminary report after each whole repetition of these cells, but the job's last.
                    if not made.last_of_repetition or len(finished) >= clock.total_runs:
                        continue
                    progress = (f"{len(finished)} of {clock.total_runs} runs; the next runs rewrite this report"
                                if staged else f"{made.repetition} of {repetitions} repetitions; the next repetition"
                                " rewrites this report")
                    report = write(JobStage("PRELIMINARY", progress))
                    logger.info(f"preliminary report ({progress.split(';')[0]}): {report.paths.html}")
    minutes = (time.monotonic() - began) / 60
    if interruption.stopped is not None:
        if not finished:
            return ReproductionResult(None, interruption.stopped, 0, minutes)
        report = write(JobStage("STOPPED", f"{interruption.stopped}; it holds only the runs that finished"))
        return ReproductionResult(report, interruption.stopped, len(finished), minutes)
    logger.info("analysing and rendering the report")
    # A run with failed requests is this job's own finding: reported (as PARTIAL), and the command exits 1.
    report = write(None)
    if store is not None and not job.quick:
        record(store, report.assessed, "reproduce", out.name)
    return ReproductionResult(report, None, len(finished), (time.monotonic() - began) / 60)


def system_batches(job: Reproduction, server: ServerConfig, workloads: Sequence[str]) -> SystemBatches:
    """Which B each system runs at: `server`'s for every system, or the preset's per system.

    A preset's continuous runs at --max-num-seqs where given, else at vLLM's own default for
    this host's cards (harness.telemetry.gpu.gpu_inventory: none on a CPU host).
    """
    if job.preset is None:
        return uniform_batches(server.max_num_seqs)
    from harness.telemetry.gpu import gpu_inventory

    preset = find_preset(job.preset)
    return preset_batches(preset, workloads, server.max_num_seqs if job.batch_given else None,
                          [] if job.batch_given else gpu_inventory())


def batches_caveat(batches: SystemBatches, workloads: Sequence[str]) -> str:
    """The report's caveat for systems that ran at different B."""
    return (f"The systems ran at different B, as the published experiment did: {batches.line(workloads)}. Each gap"
            " is continuous at its B against static and naive at theirs, not admission alone at one B (the runs"
            " table gives each run's B); `reproduce` without --preset compares them at one B.")


Stage = tuple["list[SweepCell]", "JobPlan | None"]


def _stages(job: Reproduction, systems: Sequence[SystemName], server: ServerConfig, batches: SystemBatches,
            specs: list[WorkloadSpec], endpoints: Endpoints, out: Path, stack: contextlib.ExitStack,
            repetitions: int) -> Iterator[Stage]:
    """The job's cells in the order they run, each group with its plan (None: no estimate), its servers up.

    One B for every system: one group, both servers up for the whole job, sized from a probe
    (_plan). Static at a B per workload: the continuous server up for the whole job, and per
    static B a static server started for its workloads and stopped after them; placed together
    on a GPU host, the room placed for being the widest static batch's. No probe: each static
    server would need its own.
    """
    from harness.sweep.placing import job_placement
    from harness.sweep.runs import SweepCell
    from harness.sweep.servers import run_targets
    from harness.telemetry.gpu import gpu_inventory

    modes = modes_for(systems)
    if batches.uniform:
        targets = run_targets(server, out, stack, endpoints, modes=modes, workloads=specs)
        specs, plan = _plan(job, systems, server.max_num_seqs, specs, targets, repetitions, out / "probe")
        yield [SweepCell(system, spec, targets[SERVER_MODE[system]])
               for spec in specs for system in systems if SERVER_MODE[system] in targets], plan
        return
    names = [spec.name for spec in specs]
    logger.info("no probe and no ETA: static restarts at each workload's B, and a probe prices one server")
    placed = job_placement(server, modes, specs, gpu_inventory(), batch_size=batches.largest_wave(names))
    if placed.one_at_a_time:
        raise UsageError(f"--preset {job.preset}: placement {placed.why}; one server at a time with a static server"
                         " per B is not built yet: give a larger tensor parallel, or --placement shared")
    configs = placed.configs
    targets = run_targets(server, out, stack, modes=["continuous"], workloads=specs, placed=placed)
    for wave, group in batches.wave_groups(names):
        with contextlib.ExitStack() as static_stack:
            static = configs.get("static", server).model_copy(update={"max_num_seqs": wave})
            grouped = [spec for spec in specs if spec.name in group]
            logger.info(f"static at B = {wave} for {', '.join(group)}: starting its server")
            static_targets = run_targets(static, out / "static" / f"b{wave}", static_stack, modes=["static"],
                                         workloads=grouped, placed=replace(placed, configs={"static": static}))
            every = {**targets, **static_targets}
            yield [SweepCell(system, spec, every[SERVER_MODE[system]], batch_size=batches.of(system, spec.name))
                   for spec in grouped for system in systems], None


def _plan(job: Reproduction, systems: Sequence[SystemName], batch_size: int, specs: list[WorkloadSpec],
          targets: dict[ServerMode, SweepTarget], repetitions: int,
          probe_dir: Path) -> tuple[list[WorkloadSpec], JobPlan | None]:
    """The plans the job runs, sized from a probe of this machine, and the job's estimate (None: no probe).

    The probe and the sizing are vLLM's: transformers serve records no engine steps. Its
    runs get the same plans, priced as vLLM's continuous runs until each system's first
    runs rescale them (harness.budget.eta).
    """
    from harness.budget import plan_job, plan_line, size_for_budget
    from harness.budget.probe import probe_machine

    if job.quick:
        return specs, None
    vllm = {cast(Mode, mode): target for mode, target in targets.items() if kind_of(mode).records_steps}
    if any(target.server is None for target in vllm.values()):
        logger.info("no probe and no ETA: a server given by --endpoint has no engine step log here")
        return specs, None
    probe = probe_machine(vllm, specs, probe_dir, batch_size)
    if probe is None:
        return specs, None
    systems = [system for system in SYSTEMS if SERVER_MODE[system] in targets]
    after_s = REPORT_S * repetitions
    if not job.full_size:
        sizing = size_for_budget(job.budget_min, specs, systems, repetitions, probe.machine, after_s=after_s)
        specs = list(sizing.specs)
        for workload in sizing.workloads:
            logger.info(f"{workload.spec.name}: {workload.spec.num_requests} of its {workload.full_requests} requests,"
                        f" fastest run about {workload.fastest_run_s:.0f} s")
    every = [system for system in systems if SERVER_MODE[system] in targets]
    # A server with no step log is priced as vLLM's continuous until its own runs rescale it.
    stand_ins: dict[SystemName, SystemName] = {system: "continuous" for system in every
                                               if not kind_of(SERVER_MODE[system]).records_steps}
    plan = plan_job(specs, every, repetitions, probe.machine, after_s=after_s, stand_ins=stand_ins)
    logger.info(f"probe took {probe.seconds:.0f} s; {plan_line(plan, datetime.now())}")
    return specs, plan
