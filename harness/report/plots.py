"""The report's figures, each returned as PNG bytes (matplotlib, Agg canvas, no files).

Figures are built on `matplotlib.figure.Figure` directly rather than pyplot, so no
global backend or figure registry is touched and nothing needs a display.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from harness.analysis.levels import is_cap, level_name
from harness.report.facts import SlotDiagram
from harness.systems import ALL_SYSTEMS, SystemName, shown_systems

SYSTEM_COLORS: dict[str, str] = {
    "continuous": "#1b9e77", "static": "#d95f02", "naive": "#7570b3", "client-static": "#e6ab02",
    "hf-continuous": "#e7298a",
    "hf-sequential": "#a6761d",
}
PADDING_COLOR = "#bdbdbd"
_DPI = 100


def throughput_plot(table: pd.DataFrame) -> bytes:
    """Total tok/s at each spread level of a gap table, one line per system; predictions dashed.

    Lines join the cap levels only; labelled levels (other workloads) are lone markers,
    since nothing lies between them and the caps.
    """
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    x = np.arange(len(table))
    caps = np.array([is_cap(level) for level in table["level"]])
    for system in (s for s in ALL_SYSTEMS if f"{s}_total_tok_s" in table):
        color = SYSTEM_COLORS[system]
        styles: tuple[tuple[str, dict[str, Any], str], ...] = (
            (f"{system}_total_tok_s", {"marker": "o"}, "measured"),
            (f"{system}_predicted_total_tok_s", {"marker": "x", "linestyle": "--"}, "predicted"),
        )
        for column, style, label in styles:
            values = table[column].to_numpy(dtype=float)
            if np.all(np.isnan(values)):
                continue
            ax.plot(x[caps], values[caps], color=color, label=f"{system} ({label})", **style)
            ax.plot(x[~caps], values[~caps], color=color, linestyle="none", marker=style["marker"])
    ax.set_xticks(x, [level_name(level) for level in table["level"]])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("spread level (output-length cap)")
    ax.set_ylabel("total tok/s (prompt + useful output), log scale")
    ax.set_title("Throughput against spread of output lengths")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return to_png(fig)


@dataclass(frozen=True)
class RatioPoint:
    """One headline ratio at one spread level: median, 95% interval, and the prediction (NaN: none)."""

    level: str
    point: float
    low: float
    high: float
    predicted: float


# The headline's ratios take the colour of their denominator system.
RATIO_COLORS = {"continuous/static": SYSTEM_COLORS["static"], "continuous/naive": SYSTEM_COLORS["naive"]}


def headline_plot(series: Mapping[str, Sequence[RatioPoint]]) -> bytes:
    """Each headline ratio against spread level: measured with its interval, predicted dashed.

    Small enough to sit beside the headline table in a 1280-pixel window.
    """
    fig = Figure(figsize=(5.0, 3.4))
    ax = fig.add_subplot()
    levels = list(dict.fromkeys(point.level for points in series.values() for point in points))
    offset = 0.08
    for i, (name, points) in enumerate(series.items()):
        color = RATIO_COLORS.get(name, "#444444")
        x = np.array([levels.index(p.level) for p in points], dtype=float) + (i - (len(series) - 1) / 2) * offset
        point = np.array([p.point for p in points])
        below = point - np.array([p.low for p in points])
        above = np.array([p.high for p in points]) - point
        ax.errorbar(x, point, yerr=np.vstack([below, above]), color=color, marker="o", capsize=3, label=name)
        predicted = np.array([p.predicted for p in points])
        if not np.all(np.isnan(predicted)):
            ax.plot(x, predicted, color=color, marker="x", linestyle="--", label=f"{name} predicted")
    ax.axhline(1.0, color="#888888", linewidth=0.8)
    ax.set_xticks(range(len(levels)), levels)
    ax.set_xlabel("spread level (output-length cap)")
    ax.set_ylabel("throughput ratio (total tok/s)")
    ax.set_title("Continuous batching's gain against spread", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return to_png(fig)


def occupancy_plot(series: Mapping[str, pd.DataFrame], title: str) -> bytes:
    """Running sequences / B over time, one step line per system (`occupancy_series` frames)."""
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    for system, frame in series.items():
        # Wider continuous line: it stays visible where static also runs full.
        width = 3.0 if system == "continuous" else 1.5
        ax.step(frame["t_s"], frame["occupancy"], where="post", color=SYSTEM_COLORS.get(system), label=system,
                linewidth=width)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("seconds since the first request was sent")
    ax.set_ylabel("running / B")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return to_png(fig)


def latency_plot(latencies: Mapping[tuple[str, SystemName], pd.DataFrame]) -> bytes:
    """Box plots of TTFT and useful E2E per (level, system), grouped by level.

    Each frame is a `request_table` (columns ttft_s, useful_e2e_s); keys are
    (level name, system) in the order the groups should appear.
    """
    groups = list(dict.fromkeys(level for level, _ in latencies))
    systems = shown_systems(system for _, system in latencies)
    fig = Figure(figsize=(max(7.0, 1.6 * len(groups) + 2), 6.4))
    axes = fig.subplots(2, 1, sharex=True)
    width = 0.8 / len(systems)
    for ax, column, label in zip(axes, ("ttft_s", "useful_e2e_s"), ("TTFT (s)", "useful E2E (s)"), strict=True):
        for (level, system), frame in latencies.items():
            values = frame[column].dropna().to_numpy(dtype=float)
            if values.size == 0:
                continue
            position = groups.index(level) + (systems.index(system) - (len(systems) - 1) / 2) * width
            box = ax.boxplot(values, positions=[position], widths=width * 0.9, patch_artist=True,
                             showfliers=False, manage_ticks=False)
            for patch in box["boxes"]:
                patch.set_facecolor(SYSTEM_COLORS[system])
                patch.set_alpha(0.7)
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].set_xticks(range(len(groups)), groups)
    axes[0].legend(handles=[Patch(color=SYSTEM_COLORS[s], alpha=0.7, label=s) for s in systems], fontsize="small")
    axes[0].set_title("Latency per request (whiskers 1.5 IQR, outliers hidden)")
    return to_png(fig)


def slot_diagram_plot(output_tokens: Sequence[int], batch_size: int, diagrams: Sequence[SlotDiagram]) -> bytes:
    """Which request holds each batch row at each step, for a burst, one panel per diagram.

    `diagrams` are the schedules of `output_tokens` at batch size `B`. Coloured bars
    are useful tokens (colour by requested length), grey hatched bars naive padding,
    white gaps idle slots. Titles give steps and the useful fraction.
    """
    lengths = sorted(set(int(n) for n in output_tokens))
    colormap = colormaps["tab10"]
    palette = {n: colormap(i % colormap.N) for i, n in enumerate(lengths)}
    fig = Figure(figsize=(8, 1.2 + 1.0 * len(diagrams) * max(1, batch_size / 4)))
    axes = fig.subplots(len(diagrams), 1, sharex=True)
    for ax, diagram in zip(axes, diagrams, strict=True):
        for span in diagram.spans:
            useful = span.useful_end_step - span.start_step
            ax.barh(span.row, useful, left=span.start_step, height=0.8, edgecolor="white", linewidth=0.5,
                    color=palette[int(output_tokens[span.request])])
            if span.end_step > span.useful_end_step:
                ax.barh(span.row, span.end_step - span.useful_end_step, left=span.useful_end_step, height=0.8,
                        color=PADDING_COLOR, hatch="//", edgecolor="white", linewidth=0.5)
        ax.set_yticks(range(batch_size), [f"row {r}" for r in range(batch_size)])
        ax.invert_yaxis()
        result = diagram.result
        ax.set_title(f"{diagram.system}: {result.num_steps} steps, {result.useful_fraction:.0%} of slots useful",
                     fontsize="medium")
    axes[-1].set_xlabel("decode step")
    handles = [Patch(color=palette[n], label=f"{n} tokens") for n in lengths]
    handles.append(Patch(facecolor=PADDING_COLOR, hatch="//", label="padding (naive)"))
    fig.legend(handles=handles, loc="lower center", ncols=len(handles), fontsize="small", frameon=False)
    fig.subplots_adjust(bottom=0.18, hspace=0.6)
    return to_png(fig)


def latency_cdf_plot(e2e_by_system: Mapping[str, np.ndarray], title: str) -> bytes:
    """The E2E latency CDF of each system (its values in seconds; NaN ignored)."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    for system, values in e2e_by_system.items():
        ordered = np.sort(values[np.isfinite(values)])
        if ordered.size == 0:
            continue
        ax.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post",
                color=SYSTEM_COLORS.get(system, "black"), label=system)
    ax.set_xscale("log")
    ax.set_xlabel("E2E latency (s)")
    ax.set_ylabel("share of requests")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title)
    return to_png(fig)


def trace_shape_plot(arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray,
                     window_s: float) -> bytes:
    """A trace as replayed: requests/s per `window_s` over time, and the histograms of prompt and output lengths."""
    fig = Figure(figsize=(11, 3.4))
    rate_ax, prompt_ax, output_ax = fig.subplots(1, 3)
    edges = np.arange(0.0, float(arrival_s.max()) + window_s, window_s) if arrival_s.size else np.array([0.0, 1.0])
    counts, _ = np.histogram(arrival_s, bins=edges)
    rate_ax.stairs(counts / window_s, edges, fill=True, color="#666666")
    rate_ax.set_xlabel("time into the replay (s)")
    rate_ax.set_ylabel(f"requests/s (per {window_s:g} s)")
    rate_ax.set_title("arrivals")
    for ax, values, title in ((prompt_ax, prompt_tokens, "prompt tokens"), (output_ax, output_tokens, "output tokens")):
        positive = values[values > 0]
        spread = positive.size > 0 and positive.max() > positive.min()
        bins = np.geomspace(positive.min(), positive.max() + 1, 30) if spread else 10
        ax.hist(positive, bins=bins, color="#666666")
        ax.set_xscale("log")
        ax.set_xlabel(title)
        ax.set_ylabel("requests")
        ax.set_title(f"{title}: p50 {np.median(values):,.0f}, max {values.max():,.0f}" if values.size else title)
    for ax in (rate_ax, prompt_ax, output_ax):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return to_png(fig)


def to_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # No "Software" text chunk: the same figure gives the same bytes across matplotlib builds.
    fig.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()
