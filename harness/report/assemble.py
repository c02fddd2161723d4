"""From run directories to a report: metrics, predictions, the gap table, the files.

Shared by `batchbench analyze` (runs made earlier, maybe elsewhere) and
`batchbench reproduce` (runs it just made). Repetitions of one system at one spread
level form a cell (harness.analysis.cells): its median and interval lead the report,
and its median run stands for it in the per-system tables. Predictions come from
step costs fitted on the runs' own engine steps, each cell held out of the fit
that predicts it (harness.analysis.step_predict); runs without engine steps (servers
we did not launch) get none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.assess import assess_run_dirs
from harness.analysis.cells import AssessedRun, HeadlineRow, build_cells, headline, level_ratios, median_run
from harness.analysis.gap import gap_table, with_repeated_ratios
from harness.analysis.levels import Level, level_name
from harness.analysis.prefix_cache import prefix_cache_uses
from harness.analysis.step_predict import server_step_costs
from harness.analysis.trace_replay import trace_replays
from harness.calibration.marking import is_calibration_run
from harness.errors import UsageError
from harness.reference import packaged_reference
from harness.report.document import Block, Bullets, Paragraph
from harness.report.facts import ReportExtras, ReportRun, gather_facts
from harness.report.headline import (
    PAIRED,
    at_one_speed_blocks,
    cell_blocks,
    client_bound_blocks,
    headline_blocks,
    headline_summary,
    paired_ratios,
)
from harness.report.prefix_cache import prefix_cache_blocks, prefix_cache_summary
from harness.report.reference import reference_comparison
from harness.report.render import ReportPaths, render_report
from harness.report.setup import measured_runs, setup_lines
from harness.report.step_cost_summary import StepCostSummary
from harness.report.trace import trace_answer, trace_blocks, trace_summary, trace_trust
from harness.report.untested import untested_title, untested_vllm_blocks
from harness.rundir.manifest import RunManifest, untested_vllm


@dataclass(frozen=True)
class JobStage:
    """How far the job behind a report got, for a report written before the job's end."""

    # PRELIMINARY (more repetitions follow and rewrite it) or STOPPED (the job ended early).
    label: str
    detail: str

    def line(self) -> str:
        """The stage in one line, as the title and summary.json say it."""
        return f"{self.label}: {self.detail}"


def assemble_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    caveats: Sequence[str] = (),
    smoke: bool = False,
    allow_partial: bool = False,
    stage: JobStage | None = None,
) -> AssembledReport:
    """Analyse `run_dirs` and write the report into `out_dir`, over any report already there.

    A run that does not answer for its plan is refused (UsageError) unless
    `allow_partial`; then the report's first line says PARTIAL and its lead says why.
    `stage`: the job is not finished; the title and the first line say how far it got.
    """
    if not run_dirs:
        raise UsageError("no run directories to analyse")
    assessment = assess_run_dirs(run_dirs, allow_partial)
    runs, assessed, predictions = assessment.runs, assessment.assessed, assessment.predictions
    cells = build_cells(assessed)
    rows = headline(cells)
    chosen, notes = [], list(caveats)
    for cell in cells:
        pick = median_run(cell)
        chosen.append(ReportRun(pick.entry, pick.data))
    if any(len(cell.runs) > 1 for cell in cells):
        notes.append("Where a cell was repeated, the per-system tables (throughput, latency, occupancy) show its"
                     " median run; every run is in 'Every cell, repeated' and summary.json.")
    in_sample = sorted({run_id for run_id, fitted in predictions.items() if not fitted.held_out})
    if in_sample:
        notes.append(
            f"Predicted in sample (no other cell on the same server to fit on): {', '.join(in_sample)}. Agreement"
            " there proves less."
        )
    partial = [f"{run.data.path.name}: {'; '.join(run.data.partial)}" for run in assessed if run.data.partial]
    untested = untested_vllm([run.data.manifest.server for run in assessed])
    # A trace's shape and its latency gap lead: its arrivals are open loop, so throughput follows its rate.
    replays = trace_replays(cells)
    traced = bool(trace_answer(replays))
    only_traces = traced and {row.level for row in rows} <= {replay.level for replay in replays}
    title = untested_title(PARTIAL_TITLE if partial else TRACE_TITLE if only_traces else ReportExtras().title,
                           untested)
    step_costs = server_step_costs(runs)
    extras = ReportExtras(
        title=f"{stage.line()}. {title}" if stage else title,
        caveats=notes,
        step_costs=[StepCostSummary.of(m) for m in step_costs],
    )
    # A smoke run judges no stability: that it is not a measurement is the one reason.
    blocked = ["a smoke run (--quick) is not a measurement"] if smoke else [
        f"{level_name(row.level)} is UNSTABLE ({'; '.join(row.briefs or row.reasons)})"
        for row in rows if not row.usable
    ]
    table = gap_table([run.entry for run in chosen])
    pairs = [(top, bottom) for top, bottom in (column.split("/") for column in table.columns if "/" in column)]
    table = with_repeated_ratios(table, {key: ratio.point for key, ratio in level_ratios(cells, pairs).items()})
    setup = setup_lines(measured_runs(assessed))
    # A trace's latency gap is its answer: it leads, with the setup, before the trace's shape.
    trace_lead: list[Block] = ([Paragraph(f"**{trace_answer(replays)}**"), Bullets((*setup, trace_trust(replays)))]
                               if traced else [])
    cached = prefix_cache_uses(cells)
    against_reference, reference_entry = reference_comparison(rows, assessed, packaged_reference(), smoke, step_costs)
    paths = write_report(
        chosen,
        table,
        out_dir,
        extras,
        lead=[
            *([Paragraph(f"**{stage.line()}.**")] if stage else []),
            *partial_blocks(partial),
            *untested_vllm_blocks(untested),
            *calibration_blocks([run.data.manifest for run in assessed]),
            *client_bound_blocks(assessed),
            *trace_lead,
            *trace_blocks(replays),
            *headline_blocks(rows, smoke, () if traced else setup, table),
            *against_reference,
        ],
        details=[*prefix_cache_blocks(cached), *cell_blocks(cells),
                 *at_one_speed_blocks(rows, assessment.common_fit,
                                      [run.normalised.speed for run in assessed if run.normalised is not None])],
        blocked=blocked,
        blocked_levels=None if smoke else [row.level for row in rows if not row.usable],
        summary_extra=headline_summary(rows, cells, smoke) | {"partial": partial, "untested_vllm": untested,
                                                              "stage": stage.line() if stage else None,
                                                              "traces": trace_summary(replays),
                                                              "prefix_cache": prefix_cache_summary(cached),
                                                              "reference": reference_entry},
        measured=[run.data.manifest for run in assessed],
        headline_ratio=PAIRED if paired_ratios(rows) else "",
    )
    return AssembledReport(
        paths, usable=bool(rows) and all(row.usable for row in rows), headline=rows, partial=partial,
        assessed=assessed,
    )


TRACE_TITLE = "Continuous vs static batching on a trace: the latency gap"
PARTIAL_TITLE = "PARTIAL: some runs do not answer for their plan (continuous vs static batching)"


def partial_blocks(partial: Sequence[str]) -> list[Block]:
    """Which runs are partial and why, right under the title."""
    if not partial:
        return []
    return [
        Paragraph("**Partial report (--allow-partial): these runs lack rows or hold failed requests.**"),
        Bullets(tuple(partial)),
    ]


def calibration_blocks(manifests: Sequence[RunManifest]) -> list[Block]:
    """Say first, in plain words, when runs were made against the calibration endpoint."""
    calibration = [manifest.run_id for manifest in manifests if is_calibration_run(manifest)]
    if not calibration:
        return []
    return [Paragraph(
        f"**CALIBRATION RUNS ({', '.join(calibration)}): made against batchbench's zero-cost calibration endpoint."
        " They measure the load client's own ceiling and say nothing about any server.**"
    )]


def write_report(
    runs: Sequence[ReportRun],
    table: pd.DataFrame,
    out_dir: str | Path,
    extras: ReportExtras | Mapping[str, Any] | None = None,
    *,
    lead: Sequence[Block] = (),
    details: Sequence[Block] = (),
    blocked: Sequence[str] = (),
    blocked_levels: Sequence[Level] | None = None,
    summary_extra: Mapping[str, Any] | None = None,
    measured: Sequence[RunManifest] = (),
    headline_ratio: str = "",
) -> ReportPaths:
    """Compute what the report states about `runs` and their gap `table`, and write it.

    `lead` goes right under the title (the headline), `details` after the overview;
    `blocked` names why acceptance lines may not be drawn, `blocked_levels` the levels they
    hold back (None: every level, as in a smoke run; gather_facts);
    `summary_extra` is merged into summary.json; `measured` are the manifests of every
    run measured (default: those of `runs`), for the overview's counts and hosts;
    `headline_ratio` names the headline's ratio estimator when it is not the gap
    table's ratio of medians.
    """
    facts = gather_facts(runs, table, extras, blocked=blocked, blocked_levels=blocked_levels, measured=measured)
    return render_report(facts, out_dir, lead=lead, details=details, summary_extra=summary_extra,
                         headline_ratio=headline_ratio)


@dataclass(frozen=True)
class AssembledReport:
    """What was written, and whether no headline row is UNSTABLE (reproduce's exit code)."""

    paths: ReportPaths
    # Every headline row STABLE or NOISY: its ratios, with their intervals, may be read.
    usable: bool
    headline: list[HeadlineRow]
    # One line per run that does not answer for its plan; empty for a whole report.
    partial: list[str]
    # Every run as the report judged it (for the results history).
    assessed: tuple[AssessedRun, ...] = ()
