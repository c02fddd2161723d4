"""The trend report: each configuration's throughput night by night, its baseline band,
its change points (harness.nightly.changes) and the nights the gate did not accept.

`night_series` reduces history rows to one point per night (one `invocation_id`);
`trend_plot` draws one configuration; `trend_blocks` lays the whole report out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.gate.compare import ConfigVerdict, GateResult
from harness.gate.output import HEADER, answer, configuration, rows, summary_line, why
from harness.gate.rule import format_figure
from harness.nightly.changes import ChangePoint, change_points
from harness.report.document import Block, Bullets, Heading, Image, Paragraph, Table
from harness.report.plots import to_png
from harness.report.untested import untested_title, untested_vllm_blocks


@dataclass(frozen=True)
class NightPoint:
    """One night of one configuration: the median of its repetitions and their range."""

    invocation_id: str
    recorded_at: pd.Timestamp
    median: float
    low: float
    high: float
    repetitions: int
    accepted: bool


def night_series(repetitions: pd.DataFrame, metric: str) -> list[NightPoint]:
    """One point per night of one configuration's repetitions (the store's frame), oldest first."""
    points = []
    for invocation_id, night in repetitions.loc[repetitions[metric].notna()].groupby("invocation_id", sort=False):
        values = night[metric].to_numpy(dtype=float)
        points.append(NightPoint(str(invocation_id), night["recorded_at"].max(), float(np.median(values)),
                                 float(values.min()), float(values.max()), len(values), bool(night["accepted"].all())))
    return sorted(points, key=lambda point: point.recorded_at)


def trend_plot(points: Sequence[NightPoint], verdict: ConfigVerdict, changes: Sequence[ChangePoint]) -> bytes:
    """Nightly medians with their repetition range; the baseline band; change points; unaccepted nights."""
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    x = np.arange(len(points))
    medians = np.array([p.median for p in points])
    spread = np.array([[p.median - p.low for p in points], [p.high - p.median for p in points]])
    ax.errorbar(x, medians, yerr=spread, color="#1b9e77", marker="o", capsize=3,
                label="night: median, repetition range")
    flagged = [i for i, p in enumerate(points) if not p.accepted]
    if flagged:
        ax.plot(x[flagged], medians[flagged], linestyle="none", marker="X", markersize=10, color="#d62728",
                label="not accepted (regression or inconclusive)")
    if verdict.baseline is not None and verdict.verdict is not None and math.isfinite(verdict.baseline.point):
        base = verdict.baseline.point
        ax.axhspan(base * verdict.verdict.line, base, color="#1b9e77", alpha=0.12,
                   label=f"baseline median down to the {verdict.verdict.effective_threshold:.0%} line")
    for change in changes:
        ax.axvline(change.index - 0.5, color="#7570b3", linestyle="--",
                   label=f"change point ({change.change:+.1%}, p={change.pvalue:.1g})")
    ax.set_xticks(x, [p.recorded_at.strftime("%m-%d %H:%M") for p in points], rotation=30, ha="right",
                  fontsize="small")
    ax.set_ylabel(f"{verdict.metric.replace('_', ' ')}")
    ax.set_title(verdict.label, fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower left")
    return to_png(fig)


def trend_title(suite_name: str, untested_vllm: Sequence[str] = ()) -> str:
    """The trend report's title; it says UNTESTED VLLM first when a server ran one."""
    return untested_title(f"Nightly trend: {suite_name}", untested_vllm)


def trend_setup(history: Mapping[str, pd.DataFrame]) -> list[str]:
    """What tonight measured, in a few lines: machine, server build, model; and what a baseline is."""
    frames = [frame for frame in history.values() if not frame.empty]
    if not frames:
        return []
    rows = pd.concat(frames)
    tonight = rows.loc[rows["invocation_id"] == rows.sort_values("recorded_at")["invocation_id"].iloc[-1]]
    def values(*columns: str) -> str:
        return "; ".join(dict.fromkeys(" ".join(str(v) for v in row) for row in tonight[list(columns)].to_numpy()))
    return [
        f"machine: {values('cpu')} ({values('cores')} cores), GPU {values('gpu')}",
        f"server: {values('server_name', 'server_version')}; model: {values('model')}",
        "baseline: earlier nights of the same configuration on the same machine and server build (a new build is"
        " judged against the last one's nights)",
    ]


def trend_trust(result: GateResult, history: Mapping[str, pd.DataFrame]) -> str:
    """How far tonight's verdicts can be trusted: the repetitions and nights behind them and what a verdict needs."""
    nights = [len(night_series(history[c.config_key], c.metric)) for c in result.configs if c.config_key in history]
    tonight = [c.candidate.n for c in result.configs]
    baseline = [c.baseline.n for c in result.configs if c.baseline is not None]
    def span(values: Sequence[int]) -> str:
        return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"
    line = f"its line ({result.rule.threshold:.0%}, or 3x the noise between nights where wider)"
    return (f"trust: tonight {span(tonight) if tonight else 0} repetitions per configuration against a baseline of"
            f" {span(baseline) if baseline else 'no'} repetitions (nights on the chart:"
            f" {span(nights) if nights else 0}); a regression needs the drop past {line} and the one-sided tests to"
            f" agree (p <= {result.rule.alpha:g}); a night that did not pass is left out of later baselines unless"
            " accepted (--accept)")


def trend_blocks(suite_name: str, result: GateResult, history: Mapping[str, pd.DataFrame],
                 untested_vllm: Sequence[str] = ()) -> list[Block]:
    """The trend report: tonight's verdict table, then one figure per configuration (an upgrade says so on its
    table row, its heading and its notes).

    `history` holds each configuration's repetitions (the store's frame, tonight's included),
    from this machine and server, by config_key. `untested_vllm`: the markings of servers
    launched on a vLLM outside the tested releases, said beside the verdict.
    """
    blocks: list[Block] = [
        Heading(trend_title(suite_name, untested_vllm), 1),
        *untested_vllm_blocks(untested_vllm),
        Paragraph(f"**{answer(result)}** {summary_line(result)}."),
        *([Bullets((*setup, trend_trust(result, history)))] if (setup := trend_setup(history)) else []),
        Table(HEADER, tuple(rows(result)), table_id="gate", numeric=False),
    ]
    for index, config in enumerate(result.configs):
        repetitions = history.get(config.config_key)
        points = night_series(repetitions, config.metric) if repetitions is not None else []
        if not points:
            continue
        changes = change_points([p.median for p in points])
        blocks.append(Heading(configuration(config), 2))
        blocks.append(Image(f"trend-{index}", trend_plot(points, config, changes),
                            f"{config.label}: {len(points)} nights; tonight {config.outcome}"))
        notes = [f"change point before {points[c.index].invocation_id}: {format_figure(config.metric, c.before)}"
                 f" -> {format_figure(config.metric, c.after)}"
                 f" ({c.change:+.1%}, p = {c.pvalue:.2g})" for c in changes]
        notes.append(why(config))
        blocks.append(Bullets(tuple(notes)))
    return blocks
