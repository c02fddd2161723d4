"""Repeated runs reduced to cells, and cells to the headline: medians, intervals, verdicts.

A cell is one system at one spread level, run several times. Its figure is the
median total tok/s (Anyscale's (prompt + useful tokens) / makespan) of its runs, with
an order-statistic interval and its true coverage (harness.analysis.stats). A headline row sets, at one
level, continuous against static (client-static where static was not measured) and against
naive: paired by repetition when the
systems ran interleaved, else the ratio of the medians with an unpaired interval; its
verdict is on those ratios.
Beside the measured figures, the same at one machine speed (harness.analysis.speed)
where every run has an engine log. Pure: the runs come in already measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.analysis.engine import EngineMetrics, engine_metrics, front_end_starved_share
from harness.analysis.gap import GapEntry
from harness.analysis.health import (
    HeadlineMember,
    Health,
    Verdict,
    cell_health,
    coalesced_share,
    headline_health,
    run_health,
    telemetry_stats,
)
from harness.analysis.levels import Level, level_order
from harness.analysis.metrics import RunMetrics
from harness.analysis.speed import SpeedNormalised
from harness.analysis.stats import Estimate, median_ci, paired_ratio_ci, unpaired_ratio_ci
from harness.rundir.reader import RunData
from harness.systems import OPEN_LOOP_ARRIVALS

HEADLINE_RATIOS = (("continuous", "static"), ("continuous", "naive"))
# Where static was not measured (a server batchbench did not launch), static batching kept by the client stands in.
CLIENT_HEADLINE_RATIOS = (("continuous", "client-static"), ("continuous", "naive"))


@dataclass(frozen=True, eq=False)
class AssessedRun:
    """One run with what the engine saw of it and its health."""

    entry: GapEntry
    data: RunData
    engine: EngineMetrics | None
    health: Health
    # The run at the sweep's common machine speed (harness.analysis.speed); None without steps.
    normalised: SpeedNormalised | None = None


@dataclass(frozen=True, eq=False)
class Cell:
    """One system at one spread level: its runs, median with interval, and verdict."""

    system: str
    level: Level
    runs: tuple[AssessedRun, ...]
    total_tok_s: Estimate
    health: Health
    # Median and interval of the runs at one machine speed; None when no run has one.
    normalised_tok_s: Estimate | None = None


@dataclass(frozen=True)
class HeadlineRow:
    """At one spread level: continuous over static and over naive, and whether to trust them.

    The verdict is on the ratios as shown (harness.analysis.health.headline_health), not on
    the cells' absolute figures, which move with the machine's speed; the same ratios at
    one machine speed say why a ratio did not repeat.
    """

    level: Level
    ratios: dict[str, Estimate]
    verdict: Verdict
    # Why it is UNSTABLE, in full (empty otherwise).
    reasons: tuple[str, ...]
    # The same ratios with every run at one machine speed (harness.analysis.speed): a diagnostic.
    normalised_ratios: dict[str, Estimate] = field(default_factory=dict)
    # Each failed check that makes it UNSTABLE or NOISY, in a few words.
    briefs: tuple[str, ...] = ()
    # Warnings that do not change the verdict, e.g. the machine's speed varied between repetitions.
    notes: tuple[str, ...] = ()
    # Why it is NOISY, in full (empty otherwise).
    noisy: tuple[str, ...] = ()
    # Runs of its systems that failed only a check of precision (a warning each; also in `notes`).
    run_warnings: tuple[str, ...] = ()

    @property
    def stable(self) -> bool:
        """Every ratio repeated within its limit."""
        return self.verdict == "stable"

    @property
    def usable(self) -> bool:
        """Not UNSTABLE: its ratios, with their intervals, may be reported and judged."""
        return self.verdict != "unstable"


def assess_run(
    data: RunData, metrics: RunMetrics, entry: GapEntry, normalised: SpeedNormalised | None = None
) -> AssessedRun:
    """Engine-side figures and the health verdict of one measured run."""
    engine = engine_metrics(data.steps, data.manifest.batch_size) if data.steps is not None else None
    client = data.manifest.client_health
    latency_p99, max_gap = telemetry_stats(data.telemetry)
    health = run_health(
        makespan_s=metrics.makespan_s,
        lateness_p99_s=metrics.lateness_s.p99,
        burst=data.manifest.arrival_kind == "burst",
        open_loop=data.manifest.arrival_kind in OPEN_LOOP_ARRIVALS,
        front_end_starved=(
            front_end_starved_share(data.steps, data.records["sent_s"].to_numpy(), data.manifest.batch_size)
            if data.steps is not None else math.nan
        ),
        loop_lag_p99_s=client.loop_lag_p99_s if client else None,
        loop_lag_p50_s=client.loop_lag_p50_s if client else None,
        median_itl_s=metrics.tpot_s.p50,
        client_cpu_share=client.cpu_share if client else None,
        client_generated_tokens=metrics.generated_tokens,
        client_generated_tok_s=metrics.generated_tok_s,
        engine=engine,
        metrics_latency_p99_s=latency_p99,
        telemetry_max_gap_s=max_gap,
        coalesced_share=coalesced_share(data.tokens),
    )
    return AssessedRun(entry, data, engine, health, normalised)


def build_cells(runs: Sequence[AssessedRun]) -> list[Cell]:
    """Group runs by (system, level) and give each group its median, interval and verdict."""
    groups: dict[tuple[str, Level], list[AssessedRun]] = {}
    for run in runs:
        groups.setdefault((run.entry.system, run.entry.level), []).append(run)
    cells = []
    for (system, level), members in groups.items():
        rates = _measured([run.entry.metrics.total_tok_s for run in members])
        # A run with no finished request has no rate: the cell is judged on the others, and
        # cell_health counts the repetitions that measured something.
        estimate = median_ci(rates) if rates else Estimate(math.nan, math.nan, math.nan, 0, "no run measured")
        health = cell_health(estimate, [r.health for r in members], [r.engine for r in members])
        at_one_speed = _measured([_normalised(run) for run in members])
        cells.append(Cell(system, level, tuple(members), estimate, health,
                          median_ci(at_one_speed) if len(at_one_speed) == len(members) else None))
    return cells


def _measured(rates: Sequence[float]) -> list[float]:
    return [rate for rate in rates if math.isfinite(rate) and rate > 0]


def _measured_tok_s(run: AssessedRun) -> float:
    return float(run.entry.metrics.total_tok_s)


def _normalised(run: AssessedRun) -> float:
    return run.normalised.total_tok_s if run.normalised is not None else math.nan


def run_ratio(
    a: Sequence[AssessedRun], b: Sequence[AssessedRun], value: Callable[[AssessedRun], float] = _measured_tok_s
) -> Estimate | None:
    """a's `value` (total tok/s by default) over b's, paired by repetition when the runs were interleaved.

    A sweep runs repetition r of every system back to back, so the r-th runs of two
    systems share the machine's speed at that moment: the geometric mean of their ratios,
    with a paired t interval, cancels drift between repetitions. Runs that were not
    interleaved (e.g. analysed from separate sessions) get the unpaired ratio of medians.
    """
    if _interleaved(a, b):
        pairs = [(value(x), value(y)) for x, y in zip(_by_start(a), _by_start(b), strict=True)
                 if _measured([value(x)]) and _measured([value(y)])]
        if len(pairs) == len(a):
            return paired_ratio_ci([x for x, _ in pairs], [y for _, y in pairs])
    rates_a = _measured([value(run) for run in a])
    rates_b = _measured([value(run) for run in b])
    return unpaired_ratio_ci(rates_a, rates_b) if rates_a and rates_b else None


def _by_start(runs: Sequence[AssessedRun]) -> list[AssessedRun]:
    return sorted(runs, key=lambda run: run.data.manifest.started_at)


def _interleaved(a: Sequence[AssessedRun], b: Sequence[AssessedRun]) -> bool:
    """True when a's and b's runs, in start order, ran in rounds: the i-th of each before either's (i+1)-th."""
    if len(a) != len(b) or len(a) < 2:
        return False
    starts_a = [run.data.manifest.started_at for run in _by_start(a)]
    starts_b = [run.data.manifest.started_at for run in _by_start(b)]
    return all(max(starts_a[i], starts_b[i]) < min(starts_a[i + 1], starts_b[i + 1]) for i in range(len(a) - 1))


def median_run(cell: Cell) -> AssessedRun:
    """The run whose total tok/s is the cell's (lower) median: the one shown in detail."""
    rates = np.array([run.entry.metrics.total_tok_s for run in cell.runs])
    order = np.argsort(rates)
    return cell.runs[int(order[(len(order) - 1) // 2])]


def _member(system: str, cell: Cell) -> HeadlineMember:
    return HeadlineMember(system, tuple(run.health for run in cell.runs), tuple(run.engine for run in cell.runs))


def _cells_by_level(cells: Sequence[Cell]) -> dict[Level, dict[str, Cell]]:
    """Each level's cells by system."""
    by_level: dict[Level, dict[str, Cell]] = {}
    for cell in cells:
        by_level.setdefault(cell.level, {})[cell.system] = cell
    return by_level


def level_ratios(cells: Sequence[Cell], pairs: Sequence[tuple[str, str]],
                 value: Callable[[AssessedRun], float] = _measured_tok_s) -> dict[tuple[Level, str], Estimate]:
    """At each level, `a/b` for every pair in `pairs` whose two cells exist: run_ratio of their runs.

    The one estimate of a ratio that every section of a report shows (headline, gap table,
    findings, published comparison). `value`: what is divided (total tok/s by default).
    """
    by_level = _cells_by_level(cells)
    ratios = {}
    for level, systems in by_level.items():
        for numerator, denominator in pairs:
            if numerator in systems and denominator in systems:
                a, b = systems[numerator].runs, systems[denominator].runs
                if value is _normalised and not all(run.normalised is not None for run in (*a, *b)):
                    continue
                ratio = run_ratio(a, b, value)
                if ratio is not None:
                    ratios[level, f"{numerator}/{denominator}"] = ratio
    return ratios


def headline_pairs(systems: Collection[str]) -> tuple[tuple[str, str], ...]:
    """The ratios a level's headline row shows: continuous over static and over naive, with client-static in
    static's place where static was not measured."""
    return CLIENT_HEADLINE_RATIOS if "static" not in systems and "client-static" in systems else HEADLINE_RATIOS


def headline(cells: Sequence[Cell]) -> list[HeadlineRow]:
    """One row per spread level that has continuous and at least one of static (or client-static) or naive."""
    every = tuple(dict.fromkeys((*HEADLINE_RATIOS, *CLIENT_HEADLINE_RATIOS)))
    measured = level_ratios(cells, every)
    at_one_speed = level_ratios(cells, every, _normalised)
    by_level = _cells_by_level(cells)
    rows = []
    for level, systems in by_level.items():
        if "continuous" not in systems:
            continue
        pairs = headline_pairs(systems)
        names = [f"{a}/{b}" for a, b in pairs]
        ratios = {name: measured[level, name] for name in names if (level, name) in measured}
        normalised = {name: at_one_speed[level, name] for name in names if (level, name) in at_one_speed}
        members = [_member(system, systems[system])
                   for system in dict.fromkeys(name for pair in pairs for name in pair) if system in systems]
        health = headline_health(ratios, members, normalised)
        if ratios:
            rows.append(HeadlineRow(level, ratios, health.verdict, tuple(health.reasons), normalised,
                                    tuple(health.briefs), tuple(health.notes), tuple(health.noisy),
                                    tuple(health.run_warnings)))
    return sorted(rows, key=lambda row: level_order(row.level))
