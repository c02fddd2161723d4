"""From run directories to a report: metrics, predictions, the gap table, the files.

Shared by `batchbench analyze` (runs made earlier, maybe elsewhere) and
`batchbench reproduce` (runs it just made). Repetitions of one system at one spread
level form a cell (harness.analysis.cells): its median and interval lead the report,
and its median run stands for it in the per-system tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.gap import GapEntry, gap_table, predict_for_run
from harness.analysis.metrics import metrics_for_run
from harness.analysis.rundir import load_run
from harness.calibration import Calibration
from harness.errors import UsageError
from harness.analysis.cells import HeadlineRow, assess_run, build_cells, headline, median_run
from harness.report.headline import cell_blocks, headline_blocks, headline_summary
from harness.report.plots import level_name
from harness.report.render import Block, Bullets, Paragraph, ReportExtras, ReportPaths, ReportRun, render_report


def assemble_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    calibration: Calibration | None,
    caveats: Sequence[str] = (),
    smoke: bool = False,
    allow_partial: bool = False,
) -> AssembledReport:
    """Analyse `run_dirs` and write the report into `out_dir`.

    A run that does not answer for its plan is refused (UsageError) unless
    `allow_partial`; then the report's first line says PARTIAL and its lead says why.
    """
    if not run_dirs:
        raise UsageError("no run directories to analyse")
    step_model = calibration.step_model() if calibration else None
    assessed = []
    for directory in run_dirs:
        data = load_run(directory, allow_partial)
        metrics = metrics_for_run(data)
        predicted = None
        if step_model is not None and data.plan is not None:
            predicted = predict_for_run(data.plan["requests"], data.manifest.batch_size, data.manifest.system, step_model)
        assessed.append(assess_run(data, metrics, GapEntry.from_run(data, metrics, predicted)))
    cells = build_cells(assessed)
    rows = headline(cells)
    chosen, notes = [], list(caveats)
    for cell in cells:
        pick = median_run(cell)
        chosen.append(ReportRun(pick.entry, pick.data))
        if len(cell.runs) > 1:
            notes.append(
                f"{cell.system} at {cell.level}: {len(cell.runs)} repetitions; the per-system tables show the median"
                f" run, {pick.data.path.name}."
            )
    if calibration and calibration.raw_points != calibration.points:
        raw = ", ".join(f"b={b}: {t * 1000:.2f} ms" for b, t in calibration.raw_points.items())
        notes.append(
            f"Calibration medians before the curve was made non-decreasing: {raw}. A larger batch measured"
            " as cheaper per step is noise on this machine; the prediction uses the pooled curve."
        )
    partial = [f"{run.data.path.name}: {'; '.join(run.data.partial)}" for run in assessed if run.data.partial]
    extras = ReportExtras(
        title=(PARTIAL_TITLE if partial else ReportExtras().title),
        caveats=notes,
        calibration_points=calibration.points if calibration else {},
        prefill_s_per_token=calibration.prefill_s_per_token if calibration else None,
    )
    blocked = [f"{level_name(row.level)} is UNSTABLE ({'; '.join(row.reasons)})" for row in rows if not row.stable]
    if smoke:
        blocked.insert(0, "a smoke run (--quick) is not a measurement")
    paths = render_report(
        chosen,
        gap_table([run.entry for run in chosen]),
        out_dir,
        extras,
        lead=[*partial_blocks(partial), *headline_blocks(rows, smoke)],
        details=cell_blocks(cells),
        blocked=blocked,
        summary_extra=headline_summary(rows, cells, smoke) | {"partial": partial},
        measured=[run.data.manifest for run in assessed],
    )
    return AssembledReport(
        paths, stable=bool(rows) and all(row.stable for row in rows), headline=rows, partial=partial
    )


PARTIAL_TITLE = "PARTIAL: some runs do not answer for their plan (continuous vs static batching)"


def partial_blocks(partial: Sequence[str]) -> list[Block]:
    """Which runs are partial and why, right under the title."""
    if not partial:
        return []
    return [
        Paragraph("**Partial report (--allow-partial): these runs lack rows or hold failed requests.**"),
        Bullets(tuple(partial)),
    ]


@dataclass(frozen=True)
class AssembledReport:
    """What was written, and whether every headline cell is stable (reproduce's exit code)."""

    paths: ReportPaths
    stable: bool
    headline: list[HeadlineRow]
    # One line per run that does not answer for its plan; empty for a whole report.
    partial: list[str]
