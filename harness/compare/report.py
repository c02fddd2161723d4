"""The comparison's report: the answer and the two builds first, then each (workload, system), then the evidence.

Pure: blocks (harness.report.document) and a JSON-ready summary; the job writes them.
"""

from __future__ import annotations

import statistics
from typing import Any

from harness.compare.result import ENGINE_METRIC, CellComparison, ComparisonResult
from harness.compare.statistics import PairedVerdict
from harness.report.document import Block, Bullets, Heading, Paragraph, Table

FIGURE_NAMES = {ENGINE_METRIC: "engine total tok/s", "total_tok_s": "client total tok/s"}
# The step log's figures (harness.compare.explain.StepFigures) the report shows, and their column names.
CHANGE_FIELDS = ("steps", "step_seconds", "admitted_per_step", "prefill_per_step", "running", "makespan_seconds")
CHANGE_COLUMNS = ("steps", "step time", "admitted per admitting step", "prefill tokens per prefill step",
                  "running per step", "engine makespan")


def comparison_blocks(result: ComparisonResult) -> list[Block]:
    """The report, answer first."""
    blocks: list[Block] = [
        Heading(f"B against A: {result.outcome.upper()}", 1),
        Paragraph(_answer(result)),
        Bullets((f"A: {result.a}", f"B: {result.b}", *result.setup)),
        Paragraph(_power(result)),
        Heading("Each workload and system"),
        Table(("workload", "system", "judged on", "A median", "B median", "B / A (95% interval)", "outcome",
               "client's B / A", "what the step log says"),
              tuple(_row(cell) for cell in result.cells), numeric=False),
    ]
    reasons = [f"{cell.workload} {cell.system}: {reason}" for cell in result.cells
               for reason in (*cell.notes, *(cell.verdict.reasons if cell.verdict else ()))]
    blocks += [Heading("Why each outcome"), Bullets(tuple(reasons))]
    changes = [cell for cell in result.cells if cell.change is not None]
    if changes:
        blocks += [Heading("What changed in the engine (medians over the pairs, B over A)"),
                   Table(("workload", "system", *CHANGE_COLUMNS),
                         tuple((cell.workload, cell.system, *_change_cells(cell)) for cell in changes))]
    blocks += [Heading("How B is judged"), Paragraph(_method(result))]
    return blocks


def comparison_summary(result: ComparisonResult) -> dict[str, Any]:
    """Everything the report says, as JSON."""
    return {
        "outcome": result.outcome,
        "exit_code": result.exit_code,
        "a": result.a,
        "b": result.b,
        "threshold": result.threshold,
        "expected_pair_noise": result.pair_noise,
        "expected_detectable_drop": result.expected_detectable,
        "cells": [_cell_summary(cell) for cell in result.cells],
    }


def _answer(result: ComparisonResult) -> str:
    worst = [cell for cell in result.cells if cell.outcome == result.outcome]
    named = ", ".join(f"{cell.workload} {cell.system}" for cell in worst)
    if result.outcome == "regression":
        return f"B is slower than A beyond the {result.threshold:.0%} threshold on {named}."
    if result.outcome == "pass":
        return (f"B is not slower than A by {result.threshold:.0%} or more on any of the {len(result.cells)}"
                " workloads and systems compared.")
    return f"Not decided on {named}: the reasons below say why and how many pairs would decide."


def _power(result: ComparisonResult) -> str:
    judged = [cell.verdict for cell in result.cells if cell.verdict is not None]
    said = (f"Stated before the runs: at an expected pair noise of {result.pair_noise:.1%}, a drop of"
            f" {result.expected_detectable:.1%} or more is called a regression 4 times in 5.")
    if not judged:
        return said
    noise = statistics.median(verdict.noise for verdict in judged)
    detectable = statistics.median(verdict.detectable_drop for verdict in judged)
    return (f"{said} Measured: the pairs' noise was {noise:.1%} (median over the cells), so the drop these pairs"
            f" could catch 4 times in 5 was {detectable:.1%}.")


def _row(cell: CellComparison) -> tuple[str, ...]:
    verdict = cell.verdict
    return (cell.workload, cell.system, FIGURE_NAMES.get(cell.metric, cell.metric),
            _median(cell.a_values), _median(cell.b_values), _ratio(verdict), cell.outcome.upper(),
            _ratio(cell.client), cell.change.summary if cell.change else "no step log on both sides")


def _median(values: tuple[float, ...]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "-"


def _ratio(verdict: PairedVerdict | None) -> str:
    if verdict is None:
        return "-"
    return f"{verdict.ratio:.3f} ({verdict.low:.3f}-{verdict.high:.3f}), {verdict.pairs} pairs"


def _change_cells(cell: CellComparison) -> tuple[str, ...]:
    return tuple(f"{ratio:.3f}" for ratio in _change_values(cell))


def _method(result: ComparisonResult) -> str:
    return (
        "Each (workload, system) ran on A and on B in turn, A then B in odd repetitions and B then A in even ones;"
        " repetition i of each side is pair i. The figure judged is measured, never re-priced: the engine's own"
        " total tok/s where every run has an engine step log, else the client's. The interval is a t-interval on"
        " the pairs' log ratios. Regression: the interval lies below 1 and the ratio below"
        f" {1 - result.threshold:.2f}; pass: the interval's low end is at or above {1 - result.threshold:.2f};"
        " otherwise inconclusive (exit 3), with the pairs that would likely decide. Failed requests make a"
        " (workload, system) inconclusive: they are a fault, not noise."
    )


def _cell_summary(cell: CellComparison) -> dict[str, Any]:
    return {
        "workload": cell.workload,
        "system": cell.system,
        "metric": cell.metric,
        "a": list(cell.a_values),
        "b": list(cell.b_values),
        "outcome": cell.outcome,
        "verdict": _verdict_summary(cell.verdict),
        "client": _verdict_summary(cell.client),
        "step_change": None if cell.change is None else {
            "summary": cell.change.summary,
            **dict(zip(CHANGE_FIELDS, _change_values(cell), strict=True)),
        },
        "notes": list(cell.notes),
    }


def _change_values(cell: CellComparison) -> tuple[float, ...]:
    """B over A of each step-log figure, in CHANGE_FIELDS' order."""
    assert cell.change is not None
    return tuple(float(getattr(cell.change.ratio, name)) for name in CHANGE_FIELDS)


def _verdict_summary(verdict: PairedVerdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {"outcome": verdict.outcome, "pairs": verdict.pairs, "ratio": verdict.ratio, "low": verdict.low,
            "high": verdict.high, "pair_noise": verdict.noise, "detectable_drop": verdict.detectable_drop,
            "reasons": list(verdict.reasons)}
