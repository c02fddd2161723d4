"""What a trace replay shows: the trace's own shape, and each system's latency from the trace's arrivals.

Pure: run data in, figures out. On a trace the arrivals are the trace's (open loop), so
at a rate every system sustains each one's throughput is the trace's rate, and what
batching changes is how long a request takes from the moment the trace says it arrived.
Definitions:
- Shape, from the plan (the rows replayed): the replayed span (first to last arrival),
  the mean rate over it, the peak rate (the busiest PEAK_WINDOW_S of arrivals), prompt
  and output length percentiles and the outputs' coefficient of variation. The spread of
  output lengths is what drives the gap: `wave_slot_share` is the share of slots that
  hold a useful token when the rows, in arrival order, are batched B at a time and each
  batch decodes until its longest output ends (static's and naive's waste, with no
  waiting counted).
- Due time: the run's start plus the row's (scaled) arrival offset. The start is the
  earliest `scheduled_s - arrival_s` over the run's rows: exact for continuous and static
  (each row is scheduled at its arrival), and for naive, whose rows are scheduled when
  their wave goes out, the first wave's last member. A conversation's later turn is due
  when its predecessor's answer ended plus its think time (its `scheduled_s`): the wait
  for the earlier answer is the server's, already counted in that turn.
- E2E from arrival and TTFT from arrival: the end of the response and its first token,
  from the due time. They include the client's lateness and, for naive, the wait for a
  wave to form and for the previous wave to finish.
- Queue wait ("waits at the door", harness.analysis.engine.queue_waits): send to the
  engine's first admission, from the step log; NaN without one.
- The gap: each system's median E2E from arrival over continuous's, paired by repetition
  when the runs were interleaved (harness.analysis.cells.run_ratio), with its 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.cells import AssessedRun, Cell, run_ratio
from harness.analysis.engine import queue_waits
from harness.analysis.levels import Level
from harness.analysis.metrics import Percentiles
from harness.analysis.stats import Estimate
from harness.rundir.reader import RunData

PEAK_WINDOW_S = 10.0


@dataclass(frozen=True, eq=False)
class TraceShape:
    """The rows a run replayed: when they arrive and how long they are."""

    source: str  # the trace file's name
    arrival_s: np.ndarray  # each row's offset from the first, as replayed (scaled)
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    batch_size: int
    # Rows longer than the trace's max_tokens, clipped to it (over_limit: clip); 0 for none, or no limit.
    clipped: int = 0
    max_tokens: int | None = None

    @property
    def span_s(self) -> float:
        """First to last arrival, as replayed."""
        return float(self.arrival_s.max() - self.arrival_s.min()) if self.arrival_s.size else math.nan

    @property
    def mean_rate(self) -> float:
        """Requests per second over the span: n - 1 gaps in it."""
        return (self.arrival_s.size - 1) / self.span_s if self.span_s > 0 else math.nan

    @property
    def peak_rate(self) -> float:
        """Requests per second in the busiest PEAK_WINDOW_S (a window starting at an arrival)."""
        if self.span_s <= PEAK_WINDOW_S:
            return self.mean_rate
        ordered = np.sort(self.arrival_s)
        within = np.searchsorted(ordered, ordered + PEAK_WINDOW_S, side="left") - np.arange(ordered.size)
        return float(within.max() / PEAK_WINDOW_S)

    @property
    def output_cv(self) -> float:
        """Standard deviation over mean of the output lengths: how widely they spread."""
        mean = float(self.output_tokens.mean()) if self.output_tokens.size else math.nan
        return float(self.output_tokens.std()) / mean if mean > 0 else math.nan

    @property
    def wave_slot_share(self) -> float:
        """Useful slots over slots held when rows go B at a time, in arrival order, each batch to its longest."""
        order = np.argsort(self.arrival_s, kind="stable")
        output = self.output_tokens[order]
        waves = np.arange(output.size) // self.batch_size
        held = pd.Series(output).groupby(waves).agg(["max", "size"])
        slots = float((held["max"] * held["size"]).sum())
        return float(output.sum()) / slots if slots > 0 else math.nan


@dataclass(frozen=True)
class TraceSystem:
    """One system's repetitions on a trace: medians over the runs of each run's percentiles (seconds)."""

    system: str
    runs: int
    e2e_p50_s: float
    e2e_p99_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    queue_wait_p50_s: float  # NaN without an engine step log
    queue_wait_p99_s: float
    lateness_p99_s: float  # the worst run's: the client sent on time in every run or not
    # Median E2E from arrival over continuous's; None for continuous itself or without a pair.
    e2e_ratio: Estimate | None
    # Every ok request's E2E from arrival, pooled over the runs (for the CDF).
    e2e_from_arrival_s: np.ndarray


@dataclass(frozen=True)
class TraceReplay:
    """A trace workload's replays: its shape and each system's latency on it."""

    level: Level
    shape: TraceShape
    systems: tuple[TraceSystem, ...]


def trace_shape(data: RunData) -> TraceShape | None:
    """The rows `data` replayed, from its plan; None when it did not replay a trace or has no plan."""
    trace = data.manifest.workload.trace
    if trace is None or data.plan is None:
        return None
    requests = data.plan["requests"]
    arrival = np.array([request["arrival_s"] for request in requests], dtype=float)
    return TraceShape(
        source=trace.path.name,
        arrival_s=arrival - arrival.min() if arrival.size else arrival,
        prompt_tokens=np.array([request["prompt_tokens"] for request in requests], dtype=np.int64),
        output_tokens=np.array([request["output_tokens"] for request in requests], dtype=np.int64),
        batch_size=data.manifest.batch_size,
        clipped=int(data.plan.get("trace_clipped") or 0),
        max_tokens=trace.max_tokens,
    )


def latency_from_arrival(data: RunData) -> pd.DataFrame:
    """Per ok request of a trace run: e2e_s and ttft_s from its due time, and queue_wait_s (NaN without steps).

    Indexed by request_id. Empty when the run has no plan to read the arrivals from.
    """
    if data.plan is None:
        return pd.DataFrame(columns=["e2e_s", "ttft_s", "queue_wait_s"], dtype=float)
    arrival = pd.Series({int(request["index"]): float(request["arrival_s"]) for request in data.plan["requests"]})
    records = data.records.set_index("request_id")
    offsets = arrival.reindex(records.index)
    # A conversation's later turn is due when its predecessor's answer ended plus its think time: its schedule.
    later = records["after"] >= 0 if "after" in records else pd.Series(False, index=records.index)
    start = float((records["scheduled_s"] - offsets).loc[~later].min())
    due_all = (start + offsets).where(~later, records["scheduled_s"])
    ok = records.loc[records["ok"]]
    due = due_all.loc[ok.index]
    waits = (queue_waits(data.records, data.steps) if data.steps is not None
             else pd.Series(dtype=float, name="queue_wait_s"))
    return pd.DataFrame({
        "e2e_s": ok["end_s"] - due,
        "ttft_s": ok["first_token_s"] - due,
        "queue_wait_s": waits.reindex(ok.index),
    })


def trace_replays(cells: Sequence[Cell]) -> list[TraceReplay]:
    """One entry per trace workload among `cells`, its systems in the cells' order, continuous's ratio first."""
    by_level: dict[Level, list[Cell]] = {}
    for cell in cells:
        if any(run.data.manifest.workload.trace is not None for run in cell.runs):
            by_level.setdefault(cell.level, []).append(cell)
    replays = []
    for level, members in by_level.items():
        shape = next((s for cell in members for run in cell.runs if (s := trace_shape(run.data)) is not None), None)
        if shape is None:
            continue
        continuous = next((cell for cell in members if cell.system == "continuous"), None)
        latencies = {id(run): latency_from_arrival(run.data) for cell in members for run in cell.runs}
        systems = tuple(_system(cell, continuous, latencies) for cell in members)
        replays.append(TraceReplay(level, shape, systems))
    return replays


def _system(cell: Cell, continuous: Cell | None, latencies: dict[int, pd.DataFrame]) -> TraceSystem:
    def median_of(column: str, quantile: float) -> float:
        values = [float(latencies[id(run)][column].quantile(quantile)) for run in cell.runs]
        finite = [value for value in values if math.isfinite(value)]
        return float(np.median(finite)) if finite else math.nan

    def e2e_median(run: AssessedRun) -> float:
        return float(latencies[id(run)]["e2e_s"].median())

    ratio = (run_ratio(cell.runs, continuous.runs, e2e_median)
             if continuous is not None and cell is not continuous else None)
    lateness = [run.entry.metrics.lateness_s.p99 for run in cell.runs]
    return TraceSystem(
        system=cell.system, runs=len(cell.runs),
        e2e_p50_s=median_of("e2e_s", 0.5), e2e_p99_s=median_of("e2e_s", 0.99),
        ttft_p50_s=median_of("ttft_s", 0.5), ttft_p99_s=median_of("ttft_s", 0.99),
        queue_wait_p50_s=median_of("queue_wait_s", 0.5), queue_wait_p99_s=median_of("queue_wait_s", 0.99),
        lateness_p99_s=max((value for value in lateness if math.isfinite(value)), default=math.nan),
        e2e_ratio=ratio,
        e2e_from_arrival_s=np.concatenate([latencies[id(run)]["e2e_s"].to_numpy(dtype=float) for run in cell.runs]),
    )


def shape_summary(shape: TraceShape) -> dict[str, Any]:
    """The shape's figures for summary.json."""
    prompt, output = Percentiles.of(shape.prompt_tokens), Percentiles.of(shape.output_tokens)
    return {
        "source": shape.source, "requests": int(shape.arrival_s.size), "span_s": shape.span_s,
        "mean_rate": shape.mean_rate, "peak_rate": shape.peak_rate, "peak_window_s": PEAK_WINDOW_S,
        "prompt_tokens_p50": prompt.p50, "prompt_tokens_p99": prompt.p99,
        "output_tokens_p50": output.p50, "output_tokens_mean": output.mean, "output_tokens_p99": output.p99,
        "output_tokens_max": output.max, "output_cv": shape.output_cv, "wave_slot_share": shape.wave_slot_share,
        "batch_size": shape.batch_size, "clipped": shape.clipped, "max_tokens": shape.max_tokens,
    }
