"""A trace's replays in the report: the latency gap on it first, then the trace's own shape.

The figures are harness.analysis.trace_replay's; this module words and draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.analysis.health import MAX_LATENESS_P99_S
from harness.analysis.levels import level_name
from harness.analysis.stats import Estimate
from harness.analysis.trace_replay import PEAK_WINDOW_S, TraceReplay, TraceSystem, shape_summary
from harness.report.document import Block, Heading, Image, Paragraph, SideBySide, Table
from harness.report.format import ms, num, pct, times
from harness.report.plots import latency_cdf_plot, trace_shape_plot


def trace_blocks(replays: Sequence[TraceReplay]) -> list[Block]:
    """Per trace workload: each system's latency from arrival and the gap (the evidence), then the trace's shape."""
    blocks: list[Block] = []
    for replay in replays:
        blocks += _latency_blocks(replay)
        blocks += _shape_blocks(replay)
    if blocks:
        blocks.append(Heading("Throughput"))
    return blocks


def trace_answer(replays: Sequence[TraceReplay]) -> str:
    """The trace report's answer in a sentence: each system's median E2E from arrival over continuous's."""
    parts = []
    for replay in replays:
        gaps = [f"{system.system}'s median E2E from arrival is {times(ratio.point)} continuous's"
                f" ({_spread(ratio, ratio.interval_label)})"
                for system in replay.systems if (ratio := system.e2e_ratio) is not None]
        if gaps:
            parts.append(f"on {level_name(replay.level)}, {', '.join(gaps)}")
    if not parts:
        return ""
    answer = "; ".join(parts)
    return (answer[0].upper() + answer[1:] + ". The arrivals are open loop, so every system serves the trace's"
            " rate and the gap shows in latency; throughput is under 'Throughput'.")


def trace_trust(replays: Sequence[TraceReplay]) -> str:
    """How far to trust the trace's answer, in one line: repetitions behind each ratio and whether the client kept
    to the trace's arrivals ('' without a replay)."""
    if not replays:
        return ""
    runs = min(system.runs for replay in replays for system in replay.systems)
    late = sorted({system.system for replay in replays for system in replay.systems
                   if system.lateness_p99_s > MAX_LATENESS_P99_S})
    line = ("trust: one run per system, so each ratio is one run's, with no interval: repeat with --repetitions 3"
            " for one" if runs == 1 else f"trust: {runs} repetitions per system, each ratio paired by repetition")
    if late:
        return line + (f"; the client fell behind the trace's arrivals ({', '.join(late)}: lateness p99 over"
                       f" {MAX_LATENESS_P99_S * 1e3:g} ms), so those latencies include its delay")
    return line + f"; the client kept to the trace's arrivals (lateness p99 under {MAX_LATENESS_P99_S * 1e3:g} ms)"


def _spread(ratio: Estimate, label: str) -> str:
    """A ratio's interval and the repetitions behind it, in words."""
    if ratio.n == 1:
        return "one repetition, no interval"
    return f"{ratio.low:.2f}–{ratio.high:.2f}, {label}, {ratio.n} repetitions"


def trace_summary(replays: Sequence[TraceReplay]) -> list[dict[str, Any]]:
    """summary.json's `traces`: each trace workload's shape and its systems' latency figures."""
    return [{"workload": level_name(replay.level), "shape": shape_summary(replay.shape),
             "systems": [_system_summary(system) for system in replay.systems]} for replay in replays]


def _shape_blocks(replay: TraceReplay) -> list[Block]:
    shape, name = replay.shape, level_name(replay.level)
    figures = shape_summary(shape)
    return [
        Heading(f"The trace: {name} ({shape.source})", 3),
        Paragraph(
            f"{figures['requests']:,} requests over {num(shape.span_s)} s as replayed: {num(shape.mean_rate)}"
            f" requests/s on average, {num(shape.peak_rate)} in the busiest {PEAK_WINDOW_S:g} s. Output lengths"
            f" spread with a coefficient of variation of {num(shape.output_cv)}"
            f" (p50 {num(figures['output_tokens_p50'])}, p99 {num(figures['output_tokens_p99'])},"
            f" at most {num(figures['output_tokens_max'])} tokens): batched"
            f" {shape.batch_size} at a time in arrival order, each batch decoding to its longest, only"
            f" {pct(shape.wave_slot_share)} of the slots would hold a useful token. That spread is what static"
            " and naive batching lose to; the arrivals are open loop, so what it costs them shows first in latency."
            + _clipped(figures)
        ),
        Image(f"trace-shape-{_slug(name)}", trace_shape_plot(shape.arrival_s, shape.prompt_tokens,
                                                            shape.output_tokens, PEAK_WINDOW_S),
              f"The trace {shape.source} as replayed: arrivals per {PEAK_WINDOW_S:g} s, prompt and output lengths"),
    ]


def _clipped(figures: dict[str, Any]) -> str:
    """What clipping did to the trace, in one sentence ('' when no row was clipped)."""
    if not figures["clipped"]:
        return ""
    return (f" {figures['clipped']:,} of its {figures['requests']:,} rows asked for more than max_tokens"
            f" {figures['max_tokens']:,} and were clipped to it, as the workload asks (over_limit: clip): output"
            " first, then the prompt; the figures here are of the clipped rows.")


def _latency_blocks(replay: TraceReplay) -> list[Block]:
    name = level_name(replay.level)
    gaps = [f"{system.system}'s median E2E is {times(ratio.point)} continuous's ({_spread(ratio, ratio.method)})"
            for system in replay.systems if (ratio := system.e2e_ratio) is not None]
    late = [system.system for system in replay.systems if system.lateness_p99_s > MAX_LATENESS_P99_S]
    table = Table(
        ("system", "runs", "E2E p50", "E2E p99", "TTFT p50", "TTFT p99", "queue wait p50", "queue wait p99",
         "lateness p99"),
        tuple((system.system, str(system.runs), *(num(value) for value in (
            system.e2e_p50_s, system.e2e_p99_s, system.ttft_p50_s, system.ttft_p99_s, system.queue_wait_p50_s,
            system.queue_wait_p99_s)), f"{ms(system.lateness_p99_s)} ms") for system in replay.systems),
        table_id=f"trace-latency-{_slug(name)}",
    )
    title = f"E2E latency from each request's arrival in the trace ({name}, every repetition)"
    cdf = latency_cdf_plot({system.system: system.e2e_from_arrival_s for system in replay.systems}, title)
    return [
        Heading(f"Latency on the trace: {name}"),
        Paragraph(
            "Each request's latency is measured from its arrival in the trace (its due time), so a system that"
            " queues it, or a wave that waits to form, is charged for the wait. "
            + ("; ".join(gaps) + "." if gaps else "No system ran beside continuous to compare with.")
            + " Figures are medians over the repetitions of each run's percentile (seconds); the queue wait is the"
            " engine's, from send to admission; lateness is the client's, the worst run's"
            + (f". The client fell behind the trace's arrivals ({', '.join(late)}: lateness p99 over"
               f" {MAX_LATENESS_P99_S * 1e3:g} ms): those latencies include its delay." if late else
               f", under {MAX_LATENESS_P99_S * 1e3:g} ms in every run: the client kept to the trace's arrivals.")
        ),
        SideBySide(table, Image(f"trace-latency-cdf-{_slug(name)}", cdf, title)),
    ]


def _system_summary(system: TraceSystem) -> dict[str, Any]:
    ratio = system.e2e_ratio
    return {
        "system": system.system, "runs": system.runs, "e2e_p50_s": system.e2e_p50_s, "e2e_p99_s": system.e2e_p99_s,
        "ttft_p50_s": system.ttft_p50_s, "ttft_p99_s": system.ttft_p99_s,
        "queue_wait_p50_s": system.queue_wait_p50_s, "queue_wait_p99_s": system.queue_wait_p99_s,
        "lateness_p99_s": system.lateness_p99_s,
        "e2e_ratio_to_continuous": None if ratio is None else {
            "point": ratio.point, "low": ratio.low, "high": ratio.high, "n": ratio.n, "method": ratio.method},
    }


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower())
