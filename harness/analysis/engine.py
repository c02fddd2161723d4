"""What the engine's own step log says about a run (steps.parquet, records.STEP_FIELDS).

Pure functions, no I/O. Definitions:
- Engine window: from the start of the first step that admitted one of the run's
  requests to the end of the step that finished its last one.
- generated_tok_s: output tokens the engine sampled in the window, over its length.
  Naive padded rows count their padding here, as they do in the client's
  `generated_tok_s`, so the two are the same quantity measured at both ends.
- mean_occupancy: running requests / B, weighted by each step's duration plus the
  idle gap before the next step (the batch is what it is until the next step).
- Agreement: client generated_tok_s / engine generated_tok_s - 1. The client's window
  adds the network and streaming at both ends; on one machine that is milliseconds.
- Queue wait ("waits at the door"): the start of the step that first admitted a request
  minus its send time (one machine, one wall clock): how long it queued before any of its
  work began.
- Front-end starvation: the share of the engine window in which the batch had a free
  slot (running + waiting < B) while a request the client had already sent was not yet
  in the engine. Then the API server or the client, not the batching policy, set the
  pace. A request gets `FRONT_END_GRACE_S` to reach the engine before it counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

FRONT_END_GRACE_S = 0.05


@dataclass(frozen=True)
class EngineMetrics:
    """A run as the engine saw it (times in seconds)."""

    steps: int
    makespan_s: float
    generated_tokens: int
    generated_tok_s: float
    mean_occupancy: float
    median_step_s: float


def engine_metrics(steps: pd.DataFrame, batch_size: int) -> EngineMetrics:
    """Engine-side figures of one run from its steps table."""
    if steps.empty:
        return EngineMetrics(0, math.nan, 0, math.nan, math.nan, math.nan)
    start, end = float(steps["t_s"].min()), float(steps["end_s"].max())
    makespan = end - start
    generated = int(steps["generated_tokens"].sum())
    times, running = occupancy_steps(steps)
    held = np.diff(np.append(times, end))
    occupancy = float(np.sum(running * held) / (batch_size * held.sum())) if held.sum() > 0 else math.nan
    return EngineMetrics(
        steps=len(steps),
        makespan_s=makespan,
        generated_tokens=generated,
        generated_tok_s=generated / makespan if makespan > 0 else math.nan,
        mean_occupancy=occupancy,
        median_step_s=float(np.median(step_seconds(steps))),
    )


def step_seconds(steps: pd.DataFrame) -> np.ndarray:
    """Each step's own time: from its start, or the previous step's end if later, to its end.

    Under a batch queue (async scheduling) a step is scheduled while the previous one still
    runs, so its `t_s` precedes the previous `end_s`; `end_s - t_s` would count both steps.
    Without one, steps do not overlap and this is `end_s - t_s`.
    """
    ordered = steps.sort_values("t_s")
    ends: np.ndarray = ordered["end_s"].to_numpy(dtype=float)
    began: np.ndarray = np.maximum(ordered["t_s"].to_numpy(dtype=float), np.concatenate(([-np.inf], ends[:-1])))
    seconds: np.ndarray = ends - began
    return seconds


def request_spans(steps: pd.DataFrame) -> pd.DataFrame:
    """Each request admitted and finished within `steps`: when its first and last tokens came.

    Columns: request (its id in the steps' admitted/finished lists), first_token_s (end
    of the step that admitted it: a prompt that fits one step yields its first token
    there) and last_token_s (end of the step that finished it). Requests admitted before
    or finished after the window are left out.
    """
    admitted = steps[["admitted", "end_s"]].explode("admitted").dropna()
    finished = steps[["finished", "end_s"]].explode("finished").dropna()
    spans = admitted.rename(columns={"admitted": "request", "end_s": "first_token_s"}).merge(
        finished.rename(columns={"finished": "request", "end_s": "last_token_s"}), on="request"
    )
    return spans.reset_index(drop=True)


def occupancy_steps(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(step start times, requests running in each step): the exact batch size over time."""
    ordered = steps.sort_values("t_s")
    return ordered["t_s"].to_numpy(dtype=float), ordered["running"].to_numpy(dtype=float)


def client_engine_disagreement(client_generated_tok_s: float, engine: EngineMetrics) -> float:
    """Relative difference of the client's generated tok/s from the engine's (NaN if unknown)."""
    if not math.isfinite(engine.generated_tok_s) or engine.generated_tok_s <= 0:
        return math.nan
    return client_generated_tok_s / engine.generated_tok_s - 1.0


def front_end_starved_share(steps: pd.DataFrame, sent_s: np.ndarray, batch_size: int) -> float:
    """Share of the engine window spent with a free slot while sent requests had not arrived.

    `sent_s` holds the client's send times of the run's requests (the same wall clock as
    the step log: one machine). A sent request is in the engine once it is admitted or
    waiting there; the rest are still in the front end. NaN when there are no steps.
    """
    if steps.empty:
        return math.nan
    ordered = steps.sort_values("t_s")
    starts = ordered["t_s"].to_numpy(dtype=float)
    held = np.diff(np.append(starts, float(ordered["end_s"].max())))
    # `waiting` is counted after the step's own admissions, so they are counted with it.
    in_engine = np.cumsum(ordered["admitted"].map(len).to_numpy()) + ordered["waiting"].to_numpy()
    sent_before = np.searchsorted(np.sort(np.asarray(sent_s, dtype=float)), starts - FRONT_END_GRACE_S)
    free_slot = (ordered["running"] + ordered["waiting"]).to_numpy() < batch_size
    starved = free_slot & (sent_before > in_engine)
    return float(held[starved].sum() / held.sum()) if held.sum() > 0 else math.nan


def queue_waits(records: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """Per request_id: start of the step that first admitted it minus its send time (admitted requests only)."""
    admitted = steps[["t_s", "admitted"]].explode("admitted").dropna(subset=["admitted"])
    first = admitted.groupby(admitted["admitted"].astype(np.int64))["t_s"].min()
    sent = records.set_index("request_id")["sent_s"]
    both = sent.index.intersection(first.index)
    return (first.loc[both] - sent.loc[both]).rename("queue_wait_s")
