"""The top of the report: the answer first, with intervals and an honest verdict.

Builds document blocks (harness.report.document) and the matching
summary.json entries from cells and headline rows (harness.analysis.cells).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from harness.analysis.cells import AssessedRun, Cell, HeadlineRow
from harness.analysis.health import MAX_HEADLINE_HALF_WIDTH
from harness.analysis.levels import Level, level_name, level_order
from harness.analysis.stats import Estimate
from harness.analysis.step_cost_fit import StepCostFit
from harness.report.document import Block, Bullets, Heading, Image, Paragraph, SideBySide, Stack, Table
from harness.report.plots import RatioPoint, headline_plot
from harness.systems import ALL_SYSTEMS

SMOKE_BANNER = ("Smoke run, not a measurement: cells are too short and too few to trust (--quick). It checks that"
                " every request completes; stability is not judged.")


def headline_blocks(rows: Sequence[HeadlineRow], smoke: bool, setup: Sequence[str] = (),
                    table: pd.DataFrame | None = None) -> list[Block]:
    """The answer, the setup and whether to trust it, in the order a reader needs them.

    One figure per ratio: each level's ratio as harness.analysis.cells.level_ratios gives it,
    with its interval; the table sits beside a plot of the same ratios and, from the gap
    `table`'s predicted columns, their predictions; under them one line per level that is
    not STABLE. The same ratios at one machine speed are a diagnostic (at_one_speed_blocks).
    """
    blocks: list[Block] = []
    if smoke:
        blocks.append(Paragraph(f"**{SMOKE_BANNER}**"))
    if rows:
        blocks.append(Paragraph(f"**{answer_sentence(rows, smoke)}** {_how(rows)} {_verdict_sentence(rows, smoke)}"))
    ratio_names = list(dict.fromkeys(name for row in rows for name in row.ratios))
    header = ("spread", *ratio_names, "verdict")
    body = tuple(
        (level_name(row.level), *(_ratio(row.ratios.get(name)) for name in ratio_names),
         "not judged" if smoke else row.verdict.upper() if row.verdict != "stable" else "stable")
        for row in rows
    )
    headline_table = Table(header, body, table_id="headline")
    # The setup sits under the table, beside the plot: the answer, what it was measured on and the
    # figure share the first screen.
    left = Stack((headline_table, Bullets(tuple(setup)))) if setup else headline_table
    if rows:
        blocks.append(SideBySide(left, Image("headline", headline_plot(ratio_points(rows, table)), HEADLINE_CAPTION)))
    else:
        blocks += [headline_table, *([Bullets(tuple(setup))] if setup else [])]
    if not smoke:
        lines = [*(verdict_line(row) for row in rows if row.verdict != "stable"),
                 *(f"{level_name(row.level)}, warning: {warning}" for row in rows for warning in row.run_warnings)]
        if lines:
            blocks.append(Bullets(tuple(lines)))
    return blocks


def answer_sentence(rows: Sequence[HeadlineRow], smoke: bool = False) -> str:
    """The answer in one sentence: each ratio at every level whose verdict lets it be read (all in a smoke run)."""
    usable = list(rows) if smoke else [row for row in rows if row.usable]
    parts = []
    for name in dict.fromkeys(name for row in rows for name in row.ratios):
        top, bottom = name.split("/")
        figures = [f"{row.ratios[name].point:.2f}× at {level_name(row.level)}" for row in usable if name in row.ratios]
        if figures:
            listed = ", ".join(figures[:-1]) + f" and {figures[-1]}" if len(figures) > 1 else figures[0]
            parts.append(f"{top} batching over {bottom}: {listed}")
    if not parts:
        return "No ratio can be read: every level is UNSTABLE."
    answer = "; ".join(parts)
    return answer[0].upper() + answer[1:] + "."


def _how(rows: Sequence[HeadlineRow]) -> str:
    """What the figures are: total tok/s, how repetitions are combined, what the interval means."""
    counts = sorted({ratio.n for row in rows for ratio in row.ratios.values()})
    how = (f"the geometric mean of {'/'.join(map(str, counts))} repetitions' ratios, the systems back to back in each"
           if paired_ratios(rows) else "the ratio of the systems' medians")
    return f"Total tok/s ((prompt + useful tokens) / makespan), {how}; {_ratio_interval(rows)} in the table."


def _verdict_sentence(rows: Sequence[HeadlineRow], smoke: bool) -> str:
    """Whether to trust the answer, level by level, in one sentence."""
    if smoke:
        return "Stability is not judged in a smoke run."
    by_verdict: dict[str, list[str]] = {}
    for row in rows:
        by_verdict.setdefault(row.verdict, []).append(level_name(row.level))
    said = {
        "stable": f"every repetition's ratio within ±{MAX_HEADLINE_HALF_WIDTH:.0%} of the ratio shown",
        "noisy": "the machine's speed moved between runs while the schedules repeated: read the interval, not"
                 " the point",
        "unstable": "no finding is drawn from it",
    }
    parts = [f"{verdict.upper()} at {', '.join(levels)} ({said[verdict]})"
             for verdict in ("stable", "noisy", "unstable") if (levels := by_verdict.get(verdict))]
    return "Verdict: " + "; ".join(parts) + "."


def at_one_speed_blocks(rows: Sequence[HeadlineRow], common_fit: StepCostFit | None,
                        speeds: Sequence[float]) -> list[Block]:
    """The diagnostic behind NOISY: the headline's ratios with every run re-priced at one machine speed."""
    names = list(dict.fromkeys(name for row in rows for name in row.normalised_ratios))
    if not names or common_fit is None or not speeds:
        return []
    body = tuple(
        (level_name(row.level),
         *(f"{_ratio(row.ratios.get(name))}, ±{row.ratios[name].repeat_spread:.1%}" if name in row.ratios else "–"
           for name in names),
         *(f"{_ratio(row.normalised_ratios.get(name))}, ±{row.normalised_ratios[name].repeat_spread:.1%}"
           if name in row.normalised_ratios else "–" for name in names))
        for row in rows
    )
    return [
        Heading("Why a ratio moved: the same runs at one machine speed"),
        Paragraph(
            "A diagnostic, not a second answer. Each run's busy engine time re-priced by one step-cost model fitted"
            f" on every run's engine steps (R² {common_fit.r_squared:.2f}, {common_fit.steps:,} steps): the"
            " schedule each system really ran, at one machine speed. The runs' measured speed against that model"
            f" ranged {min(speeds):.2f}–{max(speeds):.2f} (1 = the model's pace). Where the measured ratio's"
            " repetitions spread wider than the ratios at one speed, the machine's speed moved between runs (NOISY);"
            " where both spread, the schedules differed (UNSTABLE). The model prices one step the same in every"
            " system, so the two columns also differ where it misprices one system's steps."
            " ±: half the range of the repetitions' ratios over the ratio."
        ),
        Table(("spread", *(f"{name} measured" for name in names), *(f"{name} at one speed" for name in names)),
              body, table_id="at-one-speed", numeric=False),
    ]


HEADLINE_CAPTION = ("Continuous over static and over naive against spread: each ratio with its interval (as in the"
                    " table); dashed, the step-cost model's predictions.")


def verdict_line(row: HeadlineRow) -> str:
    """One line on why a headline level is NOISY or UNSTABLE."""
    return f"{level_name(row.level)}, {row.verdict.upper()}: {'; '.join(row.briefs or row.reasons)}"


def ratio_points(rows: Sequence[HeadlineRow], table: pd.DataFrame | None) -> dict[str, list[RatioPoint]]:
    """The headline's ratios per level, each with the ratio of the predicted totals where the gap table has them."""
    predicted: dict[tuple[Level, str], float] = {}
    if table is not None:
        for record in table.to_dict(orient="records"):
            for name in {name for row in rows for name in row.ratios}:
                top, bottom = name.split("/")
                denominator = record.get(f"{bottom}_predicted_total_tok_s", math.nan)
                numerator = record.get(f"{top}_predicted_total_tok_s", math.nan)
                if denominator and denominator > 0:
                    predicted[record["level"], name] = numerator / denominator
    series: dict[str, list[RatioPoint]] = {}
    for row in rows:
        for name, estimate in row.ratios.items():
            series.setdefault(name, []).append(RatioPoint(
                level_name(row.level), estimate.point, estimate.low, estimate.high,
                predicted.get((row.level, name), math.nan)))
    return series


PAIRED = "the geometric mean over repetitions of each repetition's ratio"


def paired_ratios(rows: Sequence[HeadlineRow]) -> bool:
    """Whether the headline gives any ratio as the geometric mean of paired repetitions' ratios."""
    return any("paired" in ratio.method for row in rows for ratio in row.ratios.values())


def _ratio_interval(rows: Sequence[HeadlineRow]) -> str:
    """What the headline's intervals are, in words: their coverage and what it rests on."""
    labels = sorted({ratio.interval_label for row in rows for ratio in row.ratios.values()})
    if not labels or labels == ["no interval"]:
        return "no interval (one repetition)"
    paired = " (Student's t on the log ratios)" if paired_ratios(rows) else ""
    return f"{' or '.join(labels)}s{paired}"


def client_bound_blocks(runs: Sequence[AssessedRun]) -> list[Block]:
    """A plain warning, near the top, for every run whose load client set the pace."""
    bound = client_bound_runs(runs)
    if not bound:
        return []
    return [
        Paragraph(f"**CLIENT-BOUND: in {len(bound)} of {len(runs)} runs the load client, not the server, was the"
                  " bottleneck.** Their throughput and latencies measure the client. Rerun them with more client"
                  " processes (`--workers N`) or from more client machines."),
        Bullets(tuple(f"{entry['run']}: {reason}" for entry in bound for reason in entry["reasons"])),
    ]


def client_bound_runs(runs: Sequence[AssessedRun]) -> list[dict[str, Any]]:
    """The client-bound runs and why, for the report and summary.json."""
    return [{"run": run.data.path.name, "reasons": run.health.client_bound} for run in runs if run.health.client_bound]


def cell_blocks(cells: Sequence[Cell]) -> list[Block]:
    """Every cell: median, interval, repetitions, engine agreement, verdict and why."""
    header = ("system", "spread", "median total tok/s", "interval (holds the median)", "runs", "client vs engine",
              "verdict")
    rows = []
    order: dict[str, int] = {system: at for at, system in enumerate(ALL_SYSTEMS)}
    for cell in sorted(cells, key=lambda c: (level_order(c.level), order.get(c.system, len(order)), c.system)):
        disagreements = [
            check.value for run in cell.runs for check in run.health.checks if check.name == "client vs engine"
        ]
        agreement = f"≤ {max(disagreements):.1%}" if disagreements else "client only"
        verdict = _cell_verdict(cell)
        estimate = cell.total_tok_s
        rows.append((cell.system, level_name(cell.level), f"{estimate.point:,.0f}",
                     f"{estimate.low:,.0f} – {estimate.high:,.0f}, {estimate.interval_label}", str(estimate.n),
                     agreement, verdict))
    return [
        Heading("Every cell, repeated"),
        Paragraph(
            f"Each cell's figure is the median of its runs, with an interval between two of them and how often such"
            f" an interval holds the true median, whatever the distribution ({_method(cells)}): with 3 runs it is"
            " their range, which holds the median 75% of the time; 95% needs 6 runs. Client vs engine:"
            " the largest difference between the client's generated tok/s and the engine's own step log in any run"
            " of the cell ('client only' for servers the harness did not launch). A cell's absolute figure moves"
            " with the machine's speed, which the headline's paired ratios cancel in part: a spread cell carries a"
            " warning saying whether its schedule or the machine's speed moved it; it is UNSTABLE only when a run"
            " failed a check beyond precision."
        ),
        Table(header, tuple(rows), table_id="cells", numeric=False),
    ]


def _cell_verdict(cell: Cell) -> str:
    if not cell.health.stable:
        return "UNSTABLE: " + "; ".join(cell.health.reasons)
    return "warning: " + "; ".join(cell.health.notes) if cell.health.notes else "stable"


def headline_summary(rows: Sequence[HeadlineRow], cells: Sequence[Cell], smoke: bool) -> dict[str, Any]:
    """The same figures for summary.json."""
    return {
        "smoke": smoke,
        "client_bound": client_bound_runs([run for cell in cells for run in cell.runs]),
        "stable": all(row.stable for row in rows),
        "usable": all(row.usable for row in rows),
        "headline": [
            {
                "level": row.level,
                "ratios": {name: _estimate(estimate) for name, estimate in row.ratios.items()},
                "ratios_at_one_speed": {name: _estimate(estimate) for name, estimate in row.normalised_ratios.items()},
                "verdict": row.verdict,
                "stable": row.stable,
                "reasons": list(row.reasons),
                "noisy": list(row.noisy),
                "run_warnings": list(row.run_warnings),
                "notes": list(row.notes),
            }
            for row in rows
        ],
        "cells": [
            {
                "system": cell.system,
                "level": cell.level,
                "total_tok_s": _estimate(cell.total_tok_s),
                "total_tok_s_at_one_speed": _estimate(cell.normalised_tok_s) if cell.normalised_tok_s else None,
                "stable": cell.health.stable,
                "reasons": cell.health.reasons,
                "notes": cell.health.notes,
                "runs": [
                    {
                        "run": run.data.path.name,
                        "total_tok_s": run.entry.metrics.total_tok_s,
                        "speed": run.normalised.speed if run.normalised else None,
                        "total_tok_s_at_one_speed": run.normalised.total_tok_s if run.normalised else None,
                        "engine_generated_tok_s": run.engine.generated_tok_s if run.engine else None,
                        "stable": run.health.stable,
                        "client_bound": bool(run.health.client_bound),
                        "checks": {check.name: {"value": check.value, "limit": check.limit, "passed": check.passed}
                                   for check in run.health.checks},
                    }
                    for run in cell.runs
                ],
            }
            for cell in cells
        ],
    }


def _ratio(estimate: Estimate | None) -> str:
    if estimate is None:
        return "–"
    return f"{estimate.point:.2f}× ({estimate.low:.2f}–{estimate.high:.2f})"


def _estimate(estimate: Estimate) -> dict[str, Any]:
    return {"median": estimate.point, "low": estimate.low, "high": estimate.high, "n": estimate.n,
            "method": estimate.method, "coverage": estimate.coverage}


def _method(cells: Sequence[Cell]) -> str:
    methods = sorted({cell.total_tok_s.method for cell in cells})
    return "; ".join(methods) if methods else "none"
