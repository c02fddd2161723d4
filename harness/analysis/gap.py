"""The gap table: each system's throughput at each spread level, side by side.

Pure; no I/O. Laid out like Anyscale's 2023 figure: one row per spread level (the
output-length cap: 32, 128, 512, 1536; other workloads by a label), for each system
its total and output tok/s, optionally its predicted total tok/s and the relative
difference, then the ratios of total tok/s between systems.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from harness.analysis.levels import Level, is_cap, level_name
from harness.analysis.metrics import RunMetrics
from harness.errors import UsageError
from harness.paper.simulate import ScheduleResult, simulate
from harness.paper.step_cost import StepCost
from harness.systems import ALL_SYSTEMS, SystemName, shown_systems
from harness.workload.spec import WorkloadSpec

if TYPE_CHECKING:
    from harness.rundir.reader import RunData

RATIOS: tuple[tuple[SystemName, SystemName], ...] = (
    ("continuous", "static"),
    ("continuous", "naive"),
    ("static", "naive"),
)
# Shown where a transformers system was measured: its own gain from batching, and vLLM's
# continuous batching against its continuous batching on the same model.
HF_RATIOS: tuple[tuple[SystemName, SystemName], ...] = (
    ("hf-continuous", "hf-sequential"),
    ("continuous", "hf-continuous"),
)
# Shown where client-static was measured: continuous against static batching kept by the client, and the
# client's static against the engine's (1.00x where the two schedules agree).
CLIENT_RATIOS: tuple[tuple[SystemName, SystemName], ...] = (
    ("continuous", "client-static"),
    ("static", "client-static"),
)
PER_SYSTEM_COLUMNS = ("total_tok_s", "output_tok_s", "predicted_total_tok_s", "vs_predicted")


@dataclass(frozen=True)
class RunPrediction:
    """What simulate() predicts for one run's planned requests."""

    total_tok_s: float
    output_tok_s: float
    makespan_s: float
    useful_fraction: float


@dataclass(frozen=True, eq=False)
class GapEntry:
    """One run in the gap table: its identity, its metrics, and optionally its prediction."""

    workload: str
    level: Level
    system: SystemName
    metrics: RunMetrics
    predicted: RunPrediction | None = None

    @classmethod
    def from_run(cls, run: RunData, metrics: RunMetrics, predicted: RunPrediction | None = None) -> GapEntry:
        """Identity from the run's manifest: workload name, `spread_level`, system."""
        workload = run.manifest.workload
        return cls(
            workload=workload.name,
            level=spread_level(workload),
            system=run.manifest.system,
            metrics=metrics,
            predicted=predicted,
        )


def spread_level(workload: WorkloadSpec) -> Level:
    """The output-length cap of a workload, or its name when it has no cap."""
    cap = getattr(workload.output_tokens, "cap", None)
    return int(cap) if isinstance(cap, int) else workload.name


def predict_for_run(
    plan_requests: Sequence[Mapping[str, Any] | BaseModel],
    batch_size: int,
    system: SystemName,
    step_cost: StepCost,
    wave_gap_s: float = 0.0,
) -> RunPrediction | None:
    """Simulate `system` on the run's planned prompt and output lengths and arrival times.

    `plan_requests` are plan.json's `requests` (dicts or PlannedRequest); `wave_gap_s`
    is the idle time between naive waves (simulate). Returns None for a closed loop:
    its requests have no arrival times to replay.
    """
    result = simulate_plan(plan_requests, batch_size, system, step_cost, wave_gap_s=wave_gap_s)
    if result is None:
        return None
    return RunPrediction(
        total_tok_s=result.total_tokens_per_s,
        output_tok_s=result.output_tokens_per_s,
        makespan_s=result.makespan_s,
        useful_fraction=result.useful_fraction,
    )


def simulate_plan(
    plan_requests: Sequence[Mapping[str, Any] | BaseModel],
    batch_size: int,
    system: SystemName,
    step_cost: StepCost,
    wave_gap_s: float = 0.0,
    static_batch_wait_s: float = 0.0,
) -> ScheduleResult | None:
    """The schedule `system` runs a run's plan with (simulate): None for a closed loop, which has no arrivals.

    UsageError for a plan without requests.
    """
    rows = [r.model_dump() if isinstance(r, BaseModel) else r for r in plan_requests]
    if not rows:
        raise UsageError("plan_requests: the plan has no requests to predict")
    arrivals = [r["arrival_s"] for r in rows]
    if any(a is None for a in arrivals):
        return None
    return simulate(
        system,
        np.array([r["output_tokens"] for r in rows], dtype=np.int64),
        batch_size,
        step_cost,
        prompt_tokens=np.array([r["prompt_tokens"] for r in rows], dtype=np.int64),
        arrivals=np.array(arrivals, dtype=float),
        wave_gap_s=wave_gap_s,
        static_batch_wait_s=static_batch_wait_s,
    )


def gap_table(entries: Sequence[GapEntry]) -> pd.DataFrame:
    """One row per spread level (caps ascending, then labels alphabetically).

    Columns: level, workload, then per system `<s>_total_tok_s`, `<s>_output_tok_s`,
    `<s>_predicted_total_tok_s`, `<s>_vs_predicted` (measured / predicted - 1, on total
    tok/s), then the ratios of total tok/s `continuous/static`, `continuous/naive`,
    `static/naive`. A missing run or prediction is NaN. Where a transformers system
    was measured, its columns follow vLLM's, and the ratios `hf-continuous/hf-sequential`
    and `continuous/hf-continuous` follow theirs. Two runs of the same system at the same
    level are refused.
    """
    seen: dict[tuple[Level, str], str] = {}
    for entry in entries:
        key = (entry.level, entry.system)
        if key in seen:
            raise ValueError(
                f"gap table: two {entry.system} runs at spread level {entry.level} "
                f"({seen[key]} and {entry.workload}); give one run per system and level"
            )
        seen[key] = entry.workload
    systems = shown_systems(entry.system for entry in entries)
    ratios = _ratios(systems)
    rows = [_row(level, [e for e in entries if e.level == level], systems, ratios)
            for level in _ordered_levels(entries)]
    per_system = [f"{s}_{name}" for s in systems for name in PER_SYSTEM_COLUMNS]
    return pd.DataFrame(rows, columns=["level", "workload", *per_system, *(f"{a}/{b}" for a, b in ratios)])


def _ratios(systems: Sequence[SystemName]) -> list[tuple[SystemName, SystemName]]:
    shown = [*CLIENT_RATIOS, *HF_RATIOS]
    return [*RATIOS, *((a, b) for a, b in shown if a in systems and b in systems)]


def _ordered_levels(entries: Sequence[GapEntry]) -> list[Level]:
    levels = {e.level for e in entries}
    caps = sorted(level for level in levels if is_cap(level))
    labels = sorted(level for level in levels if not is_cap(level))
    return [*caps, *labels]


def _row(level: Level, entries: list[GapEntry], systems: Sequence[SystemName],
         ratios: Sequence[tuple[SystemName, SystemName]]) -> dict[str, Any]:
    row: dict[str, Any] = {"level": level, "workload": ", ".join(sorted({e.workload for e in entries}))}
    by_system = {e.system: e for e in entries}
    for system in systems:
        entry = by_system.get(system)
        measured = entry.metrics.total_tok_s if entry else math.nan
        predicted = entry.predicted.total_tok_s if entry and entry.predicted else math.nan
        row[f"{system}_total_tok_s"] = measured
        row[f"{system}_output_tok_s"] = entry.metrics.output_tok_s if entry else math.nan
        row[f"{system}_predicted_total_tok_s"] = predicted
        row[f"{system}_vs_predicted"] = _ratio(measured, predicted) - 1
    for a, b in ratios:
        row[f"{a}/{b}"] = _ratio(row[f"{a}_total_tok_s"], row[f"{b}_total_tok_s"])
    return row


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def with_repeated_ratios(table: pd.DataFrame, ratios: Mapping[tuple[Level, str], float]) -> pd.DataFrame:
    """`table` with each ratio column `a/b` at each level replaced by `ratios[(level, "a/b")]` where given.

    The report's one figure per ratio: over repetitions, the headline's estimate (each
    repetition's ratio, averaged), not the quotient of the two median runs' figures.
    """
    out = table.copy()
    for index, level in zip(out.index, out["level"], strict=True):
        for column in out.columns:
            if "/" in column and (level, column) in ratios:
                out.at[index, column] = ratios[level, column]
    return out


def check_acceptance(table: pd.DataFrame, tolerance: float = 0.10, beat_above: int = 32) -> list[str]:
    """Human-readable findings on a `gap_table`, each starting PASS, FAIL or SKIP.

    Checks: static/naive (the acceptance check), continuous/static and continuous/naive
    each grow strictly with spread over the cap levels; continuous beats static at every
    cap above `beat_above`; every measured total tok/s is within `tolerance` of its
    prediction (one FAIL line per run outside it).
    """
    caps = table.loc[[is_cap(level) for level in table["level"]]]
    growth = ("static/naive", "continuous/static", "continuous/naive")
    findings = [_grows_with_spread(caps, column) for column in growth]
    findings.append(_continuous_beats_static(caps, beat_above))
    findings.extend(_within_prediction(table, tolerance))
    return findings


def _grows_with_spread(caps: pd.DataFrame, column: str) -> str:
    known = caps.loc[caps[column].notna(), ["level", column]]
    if len(known) < 2:
        return f"SKIP: {column} grows with spread: fewer than two caps have both systems"
    values = known[column].to_numpy()
    trail = " -> ".join(f"{v:.2f}" for v in values)
    where = f"(caps {', '.join(str(level) for level in known['level'])})"
    verdict = "PASS" if np.all(np.diff(values) > 0) else "FAIL"
    return f"{verdict}: {column} grows with spread: {trail} {where}"


def _continuous_beats_static(caps: pd.DataFrame, beat_above: int) -> str:
    above = caps.loc[(caps["level"] > beat_above) & caps["continuous/static"].notna()]
    claim = f"continuous beats static at every cap above {beat_above}"
    if above.empty:
        return f"SKIP: {claim}: no cap above {beat_above} has both systems"
    losing = above.loc[above["continuous/static"] <= 1]
    if losing.empty:
        return f"PASS: {claim} (lowest continuous/static {above['continuous/static'].min():.2f})"
    pairs = zip(losing["level"], losing["continuous/static"], strict=True)
    listed = ", ".join(f"{v:.2f} at cap {level}" for level, v in pairs)
    return f"FAIL: {claim}: continuous/static {listed}"


def _within_prediction(table: pd.DataFrame, tolerance: float) -> list[str]:
    claim = f"each system within {tolerance:.0%} of its prediction"
    checked: list[tuple[float, str]] = []
    for _, row in table.iterrows():
        for system in (s for s in ALL_SYSTEMS if f"{s}_vs_predicted" in row):
            difference = row[f"{system}_vs_predicted"]
            if not math.isnan(difference):
                checked.append((difference, f"{system} at {level_name(row['level'])}"))
    if not checked:
        return [f"SKIP: {claim}: no predictions"]
    outside = [(d, where) for d, where in checked if abs(d) > tolerance]
    if not outside:
        worst, where = max(checked, key=lambda item: abs(item[0]))
        # Rounding first turns float noise like -1e-16 into +0.0%, not -0.0%.
        return [f"PASS: {claim} ({len(checked)} runs; worst {where}, {round(worst, 3) + 0.0:+.1%})"]
    return [f"FAIL: {claim}: {where} measured {d:+.1%} from predicted" for d, where in outside]

