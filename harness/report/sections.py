"""The report's sections, laid out from computed facts (harness.report.facts).

Each function returns document blocks; none of them computes beyond picking and
formatting values. The published-figures comparison has its own module
(harness.report.published).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from harness.analysis.levels import level_name
from harness.report.document import Block, Bullets, Heading, Image, Paragraph, Table
from harness.report.facts import SEED_B, SEED_DIAGRAM_OUTPUTS, SEED_OUTPUTS, Occupancy, ReportFacts, ReportRun
from harness.report.format import ms, num, pct, times
from harness.report.plots import latency_plot, occupancy_plot, slot_diagram_plot, throughput_plot
from harness.report.step_cost_summary import StepCostSummary


def overview_section(metadata: Mapping[str, Any]) -> list[Block]:
    """How many runs, and the harness that made them (hosts, models and servers are in the setup lines above)."""
    hosts = metadata["hosts"]
    made = ", ".join(metadata["harness_versions"]) + " at git " + ", ".join(metadata["git_shas"])
    blocks: list[Block] = [Paragraph(f"Built from {metadata['runs']} runs, by batchbench {made}.")]
    if len(hosts) > 1:
        blocks.append(Paragraph(
            f"Warning: these runs come from {len(hosts)} different hosts; throughputs measured on different "
            "machines are not comparable, so the ratios below mix hardware with batching."
        ))
    return blocks


def gap_section(table: pd.DataFrame, headline_ratio: str = "") -> list[Block]:
    """The gap table and the throughput plot.

    `headline_ratio` names how the ratio columns combine repetitions where they are the
    headline's (harness.analysis.gap.with_repeated_ratios), not the quotient of the runs shown.
    """
    estimators = (
        f" The ratio columns are the headline's ({headline_ratio}), so they need not equal the quotient of the"
        " median runs' figures beside them."
        if headline_ratio else ""
    )
    blocks: list[Block] = [
        Heading("Throughput gap"),
        Paragraph(
            "One row per spread level (the output-length cap; other workloads by name). total tok/s counts "
            "prompt plus useful output tokens per second of makespan (Anyscale's definition); output tok/s "
            "counts useful output tokens only, so naive batching's padding is not credited. Ratios compare "
            f"total tok/s; 'vs predicted' is measured / predicted - 1.{estimators}"
        ),
        gap_html_table(table),
    ]
    if not table.empty:
        blocks.append(Image("throughput", throughput_plot(table),
                            "Total tok/s against spread level per system; dashed lines are predictions."))
    return blocks


def gap_html_table(table: pd.DataFrame) -> Table:
    """The gap table as a report table (id gap-table), columns with no value left out."""
    shown = [c for c in table.columns if c in ("level", "workload") or table[c].notna().any()]
    header = tuple(c.replace("_tok_s", " tok/s").replace("_", " ") for c in shown)
    rows = tuple(
        tuple(_gap_cell(column, value) for column, value in zip(shown, row, strict=True))
        for row in table[shown].itertuples(index=False)
    )
    return Table(header, rows, table_id="gap-table")


def _gap_cell(column: str, value: Any) -> str:
    if column in ("level", "workload"):
        return str(value)
    if "/" in column:
        return times(value)
    if column.endswith("_vs_predicted"):
        return pct(value, signed=True)
    return num(value)


def acceptance_section(findings: Sequence[str]) -> list[Block]:
    """The acceptance findings, one bullet each."""
    return [
        Heading("Acceptance findings"),
        Paragraph("Findings, not verdicts on the code: each line says whether the measured table shows the "
                  "expected shape."),
        Bullets(tuple(findings)),
    ]


def occupancy_section(occupancy: Occupancy) -> list[Block]:
    """Running / B over time for static and continuous at one spread level."""
    blocks: list[Block] = [Heading("Batch occupancy over time")]
    level = occupancy.level
    if level is None:
        return [*blocks, Paragraph("No spread level has both a static and a continuous run; plot omitted.")]
    if not occupancy.series:
        return [*blocks, Paragraph(f"No telemetry at {level_name(level)}; plot omitted.")]
    means = ", ".join(f"{system} {pct(mean)}" for system, mean in occupancy.means.items())
    caption = (
        f"Running sequences / B at {level_name(level)} (mean {means}): static batching's rows stay "
        "empty until its batch's longest request ends (a sawtooth), continuous batching refills them."
    )
    return [*blocks, Image("occupancy", occupancy_plot(occupancy.series, f"Occupancy at {level_name(level)}"), caption)]


def latency_section(facts: ReportFacts) -> list[Block]:
    """The latency plot and the per-run metrics table."""
    blocks: list[Block] = [Heading("Latency and per-run metrics")]
    if facts.ordered:
        blocks.append(Image("latency", latency_plot(facts.latencies),
                            "TTFT and useful E2E (to the last wanted token) per request, by spread level and system."))
    blocks += [
        Paragraph(
            "Times in ms. TTFT and E2E count from when the client sent the request: for continuous and static,"
            " the whole burst goes out at the start, so their TTFT includes the wait for a batch slot; naive's"
            " client holds each wave back until the previous one ends and only then sends it, so its TTFT leaves"
            " that wait out (its whole cost shows in the makespan). Useful E2E runs to the last wanted token (for"
            " naive rows, before the padding). "
            "Occupancy is running / B from telemetry; useful slot-time is the share of B x makespan "
            "slot-seconds spent between a request's first and last useful token (it misses each request's "
            "admission step, which the client cannot see). Goodput counts ok requests meeting every set SLO."
        ),
        _run_table(facts.ordered),
    ]
    return blocks


def _run_table(runs: Sequence[ReportRun]) -> Table:
    header = (
        "run", "system", "level", "B", "ok / sent", "total tok/s", "output tok/s", "req/s", "TTFT p50", "TTFT p99",
        "useful E2E p50", "useful E2E p99", "TPOT p50", "ITL p99", "goodput req/s", "SLO met", "occupancy",
        "useful slot-time", "lateness p99", "length mismatches",
    )
    rows = []
    for run in runs:
        m = run.entry.metrics
        rows.append((
            run.data.manifest.run_id, run.entry.system, str(run.entry.level), str(run.data.manifest.batch_size),
            f"{m.ok} / {m.requests}", num(m.total_tok_s), num(m.output_tok_s), num(m.req_s),
            ms(m.ttft_s.p50), ms(m.ttft_s.p99), ms(m.useful_e2e_s.p50), ms(m.useful_e2e_s.p99),
            ms(m.tpot_s.p50), ms(m.itl_s.p99), num(m.goodput_req_s), pct(m.slo_met_fraction),
            pct(m.mean_occupancy), pct(m.useful_slot_time_fraction), ms(m.lateness_s.p99),
            str(m.length_mismatches),
        ))
    return Table(header, tuple(rows))


def seed_section(facts: ReportFacts) -> list[Block]:
    """The seed example: where static batching's slots go, simulated."""
    fractions = facts.seed_fractions
    return [
        Heading("The seed example: where static batching's slots go"),
        Paragraph(
            f"Outputs of {'/'.join(map(str, SEED_OUTPUTS))} tokens, cycled to {len(SEED_DIAGRAM_OUTPUTS)} requests, "
            f"all sent at once, batch of {SEED_B}. A static batch runs as long as its longest member, so its "
            f"finished rows sit empty: {fractions['static']:.0%} of slots useful. Naive batching fills those rows "
            f"with padding (same {fractions['naive']:.0%} useful, but the padding costs compute). Continuous "
            f"batching refills a row the step after it frees: {fractions['continuous']:.0%} useful, the rest "
            "being the tail where the last long request runs alone. Simulated, no run data."
        ),
        Image("seed-slots", slot_diagram_plot(SEED_DIAGRAM_OUTPUTS, SEED_B, facts.seed_diagrams),
              "Batch rows over decode steps for static, naive and continuous batching (grey hatched: padding)."),
    ]


def step_cost_section(step_costs: Sequence[StepCostSummary]) -> list[Block]:
    """The fitted step cost of each server: where it comes from and its constants."""
    blocks: list[Block] = [Heading("Step-cost model")]
    if not step_costs:
        return [*blocks, Paragraph("No engine steps to fit (servers we did not launch): no predictions.")]
    rows = tuple(
        (m.server, str(m.runs), f"{m.steps:,}", ms(m.overhead_s), f"{m.per_sequence_s * 1e6:.1f}",
         f"{m.per_prefill_token_s * 1e6:.2f}", f"{m.per_context_token_s * 1e9:.1f}",
         f"{m.per_prefill_pair_s * 1e9:.2f}", f"{m.r_squared:.3f}",
         f"{ms(m.residual_std_s)} / {ms(m.mean_step_s)}", ms(m.wave_gap_s))
        for m in step_costs
    )
    return [
        *blocks,
        Paragraph(
            "Source: fitted on the engines' own step logs (steps.parquet), not on client timings. One model per "
            "server: step cost = overhead + per sequence x sequences + per prefill token x prompt tokens computed + "
            "per context token x tokens attended to + per prefill pair x the (query, key) pairs the step's prompt "
            "tokens attend over (a prompt's attention grows with its square; 0 where the steps did not record "
            "them), non-negative least squares over every busy step (start to start of the next step, while a "
            "request still runs: waits for the client or for a static batch to form left out). The constants "
            "below are fitted on all of "
            "a server's runs; each prediction in the tables above comes from the same fit without the runs of its "
            "own cell (system and spread level), so no cell is predicted from its own steps. Waves sent by the "
            "client (naive, client-static) add the engine's mean idle gap between waves in the server's other cells "
            "of waves (the client's turnaround)."
        ),
        Table(("server", "runs", "steps", "overhead ms", "per sequence us", "per prefill token us",
               "per context token ns", "per prefill pair ns", "R²", "residual sd / mean step ms",
               "wave gap ms"), rows, numeric=False),
    ]


def caveats_section(caveats: Sequence[str]) -> list[Block]:
    """The caveats, one paragraph each."""
    if not caveats:
        return [Heading("Caveats"), Paragraph("None given.")]
    return [Heading("Caveats"), *(Paragraph(text) for text in caveats)]
