"""From run directories to a report: metrics, predictions, the gap table, the files.

Shared by `batchbench analyze` (runs made earlier, maybe elsewhere) and
`batchbench reproduce` (runs it just made). Repetitions of one system at one spread
level are reduced to the run with the median total tok/s, named in the caveats.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from harness.analysis.gap import GapEntry, gap_table, predict_for_run
from harness.analysis.metrics import metrics_for_run
from harness.analysis.rundir import load_run
from harness.calibration import Calibration
from harness.errors import UsageError
from harness.report.render import ReportExtras, ReportPaths, ReportRun, render_report


def assemble_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    calibration: Calibration | None,
    caveats: Sequence[str] = (),
) -> ReportPaths:
    """Analyse `run_dirs` and write the report into `out_dir`."""
    if not run_dirs:
        raise UsageError("no run directories to analyse")
    step_model = calibration.step_model() if calibration else None
    by_cell: dict[tuple[str, object], list[ReportRun]] = defaultdict(list)
    for directory in run_dirs:
        data = load_run(directory)
        metrics = metrics_for_run(data)
        predicted = None
        if step_model is not None and data.plan is not None:
            predicted = predict_for_run(data.plan["requests"], data.manifest.batch_size, data.manifest.system, step_model)
        entry = GapEntry.from_run(data, metrics, predicted)
        by_cell[(entry.system, entry.level)].append(ReportRun(entry, data))
    chosen, notes = [], list(caveats)
    for (system, level), runs in by_cell.items():
        pick = _median_run(runs)
        chosen.append(pick)
        if len(runs) > 1:
            rates = ", ".join(f"{r.entry.metrics.total_tok_s:.0f}" for r in runs)
            notes.append(
                f"{system} at {level}: {len(runs)} repetitions ({rates} total tok/s); the report shows the median run,"
                f" {pick.data.path.name}."
            )
    if calibration and calibration.raw_points != calibration.points:
        raw = ", ".join(f"b={b}: {t * 1000:.2f} ms" for b, t in calibration.raw_points.items())
        notes.append(
            f"Calibration medians before the curve was made non-decreasing: {raw}. A larger batch measured"
            " as cheaper per step is noise on this machine; the prediction uses the pooled curve."
        )
    extras = ReportExtras(
        caveats=notes,
        calibration_points=calibration.points if calibration else {},
        prefill_s_per_token=calibration.prefill_s_per_token if calibration else None,
    )
    return render_report(chosen, gap_table([run.entry for run in chosen]), out_dir, extras)


def _median_run(runs: list[ReportRun]) -> ReportRun:
    rates = [run.entry.metrics.total_tok_s for run in runs]
    median = statistics.median_low(rates)
    return runs[rates.index(median)]
