"""Per-run metrics: what one run's tables say about its throughput and latency.

Pure functions over the tables of harness/rundir/records.py; no I/O. The definitions:

- Window and makespan: from the first `sent_s` to the last `end_s` of the ok requests.
  Every rate below divides by the makespan; failed requests add nothing to any rate.
- Generated tokens of an ok request: its `completion_tokens`, the tokens that arrived
  (runs recorded before that column was counted from the stream hold the server's
  usage there), or its rows in the tokens table when that is -1.
- Useful tokens: min(generated, planned_output_tokens). A padded (naive) request asks
  for more than planned; the excess is padding, not output.
- Prompt tokens: the server's `prompt_tokens`, or the planned length when unknown (-1).
- output_tok_s = useful / makespan; generated_tok_s = generated / makespan (differs
  only when padding was generated); total_tok_s = (prompt + useful) / makespan, the
  Anyscale definition; req_s = ok requests / makespan.
- TTFT = first_token_s - sent_s. E2E = end_s - sent_s (the whole response, padding
  included). Useful E2E = arrival of the last useful token (token index useful-1 in
  the tokens table) - sent_s: what the user waited for; for a naive row it excludes
  the padding, for other rows it differs from E2E only by the closing chunk. It falls
  back to E2E when the tokens table lacks that token.
- TPOT = (last useful token time - first token time) / (useful - 1), per request,
  undefined (NaN, left out) for a single useful token.
- ITL: differences between consecutive useful token arrival times within a request,
  first token excluded. Coalesced chunks give honest zeros.
- Distributions are count, mean, p50, p90, p99 and max over the defined values
  (NaN left out), percentiles by numpy's linear interpolation.
- Goodput: ok requests meeting every SLO that is set (TTFT, TPOT, useful E2E; an
  undefined TPOT meets any TPOT target) per second of makespan; slo_met_fraction is
  their share of all requests sent, failed ones included. With no SLO set every ok
  request counts.
- Mean occupancy: `running` / B from telemetry, each poll's value held until the next
  poll but for at most `HOLD_POLLS` polling intervals, time-weighted over the part of
  the window the polls cover. Under load vLLM's API server can answer /metrics seconds
  late; holding one value across such a gap would invent seconds of occupancy, so a
  longer gap counts as unknown (left out of the mean, a break in the plot).
- Useful slot-time fraction: sum over ok requests of (last useful token time - first
  token time) / (B x makespan): the share of the B x makespan slot-seconds spent
  producing wanted tokens. The client cannot count decode steps (coalescing hides
  them, telemetry is polled), so the step-based useful fraction is left to the
  prediction (simulate's `useful_fraction`); this time-based figure matches it when
  step times are equal, and undercounts each request by its admission step (1/n of its
  slot time for n tokens), which the client never sees.
- Lateness: `lateness_s` of every request sent; all NaN (closed loop) gives NaN stats.
- GPU: energy (joules per generated token), power, utilisation and memory headroom
  over the same window, from the run's NVML samples (harness.analysis.energy); None
  for a run without them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.analysis.energy import GpuMetrics, gpu_metrics
from harness.workload.spec import SloMs

if TYPE_CHECKING:
    from harness.rundir.reader import RunData


@dataclass(frozen=True)
class Percentiles:
    """Summary of a sample: count of defined values, mean, p50, p90, p99, max."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Any) -> Percentiles:
        """Summarise `values`, leaving NaN out; all NaN or empty gives count 0 and NaN stats."""
        array = np.asarray(values, dtype=float)
        array = array[~np.isnan(array)]
        if array.size == 0:
            return cls(count=0, mean=math.nan, p50=math.nan, p90=math.nan, p99=math.nan, max=math.nan)
        p50, p90, p99 = np.percentile(array, [50, 90, 99])
        return cls(
            count=int(array.size),
            mean=float(array.mean()),
            p50=float(p50),
            p90=float(p90),
            p99=float(p99),
            max=float(array.max()),
        )


@dataclass(frozen=True, eq=False)
class RunMetrics:
    """Every per-run metric, as defined in this module's docstring (times in seconds)."""

    requests: int
    ok: int
    failed: int
    length_mismatches: int
    errors: dict[str, int]
    makespan_s: float
    prompt_tokens: int
    useful_tokens: int
    generated_tokens: int
    output_tok_s: float
    generated_tok_s: float
    total_tok_s: float
    req_s: float
    ttft_s: Percentiles
    e2e_s: Percentiles
    useful_e2e_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    slo_met: int
    slo_met_fraction: float
    goodput_req_s: float
    mean_occupancy: float
    useful_slot_time_fraction: float
    lateness_s: Percentiles
    # None for a run without GPU samples (no GPU, no NVML, or recorded before them).
    gpu: GpuMetrics | None = None

    def to_flat_dict(self) -> dict[str, Any]:
        """One level of scalars: distributions and GPU figures as `name.field`, errors as `errors.<message>`."""
        flat: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, (Percentiles, GpuMetrics)):
                flat.update({f"{item.name}.{stat.name}": getattr(value, stat.name) for stat in fields(value)})
            elif isinstance(value, dict):
                flat.update({f"{item.name}.{key}": count for key, count in value.items()})
            else:
                flat[item.name] = value
        return flat


# A poll stands for the server's state this many polling intervals at most.
HOLD_POLLS = 4


def compute_run_metrics(
    records: pd.DataFrame,
    tokens: pd.DataFrame,
    telemetry: pd.DataFrame,
    batch_size: int,
    slo: SloMs | None = None,
    telemetry_interval_s: float | None = None,
    gpu: pd.DataFrame | None = None,
) -> RunMetrics:
    """All metrics of one run from its three tables, its B, its SLOs and its polling interval;
    its GPU figures too when given its GPU samples."""
    slo = slo or SloMs()
    requests = request_table(records, tokens)
    start, end = makespan_window(records)
    makespan = end - start
    useful = int(requests["useful_tokens"].sum())
    generated = int(requests["generated_tokens"].sum())
    prompt = int(requests["prompt_tokens"].sum())
    met = int(slo_met_mask(requests, slo).sum())
    ok = len(requests)
    return RunMetrics(
        requests=len(records),
        ok=ok,
        failed=len(records) - ok,
        # Failed as such since ok requires the tokens asked for; ok and flagged in older runs.
        length_mismatches=int(
            (records["error_kind"].eq("length_mismatch") | (records["ok"] & records["length_mismatch"])).sum()
        ),
        errors=error_counts(records),
        makespan_s=makespan,
        prompt_tokens=prompt,
        useful_tokens=useful,
        generated_tokens=generated,
        output_tok_s=_rate(useful, makespan),
        generated_tok_s=_rate(generated, makespan),
        total_tok_s=_rate(prompt + useful, makespan),
        req_s=_rate(ok, makespan),
        ttft_s=Percentiles.of(requests["ttft_s"]),
        e2e_s=Percentiles.of(requests["e2e_s"]),
        useful_e2e_s=Percentiles.of(requests["useful_e2e_s"]),
        tpot_s=Percentiles.of(requests["tpot_s"]),
        itl_s=Percentiles.of(inter_token_latencies(tokens, requests)),
        slo_met=met,
        slo_met_fraction=met / len(records) if len(records) else math.nan,
        goodput_req_s=_rate(met, makespan),
        mean_occupancy=mean_occupancy(telemetry, batch_size, start, end, max_hold_s(telemetry_interval_s)),
        useful_slot_time_fraction=useful_slot_time_fraction(requests, batch_size, makespan),
        lateness_s=Percentiles.of(records["lateness_s"]),
        gpu=gpu_metrics(gpu, start, end, generated) if gpu is not None else None,
    )


def metrics_for_run(run: RunData) -> RunMetrics:
    """`compute_run_metrics` with B and the SLOs taken from the run's manifest."""
    slo = run.manifest.workload.slo or SloMs()
    return compute_run_metrics(
        run.records, run.tokens, run.telemetry, run.manifest.batch_size, slo, run.manifest.telemetry_interval_s,
        run.gpu,
    )


def max_hold_s(telemetry_interval_s: float | None) -> float:
    """How long one poll's value may stand for the server's state (unbounded if unknown)."""
    return math.inf if telemetry_interval_s is None else HOLD_POLLS * telemetry_interval_s


def makespan_window(records: pd.DataFrame) -> tuple[float, float]:
    """(first sent_s, last end_s) of the ok requests; (NaN, NaN) when none is ok."""
    ok = records.loc[records["ok"]]
    if ok.empty:
        return math.nan, math.nan
    return float(ok["sent_s"].min()), float(ok["end_s"].max())


def request_table(records: pd.DataFrame, tokens: pd.DataFrame) -> pd.DataFrame:
    """One row per ok request with the per-request quantities every metric builds on.

    Columns: request_id, prompt_tokens, generated_tokens, useful_tokens, padded,
    ttft_s, e2e_s, useful_e2e_s, tpot_s, useful_span_s (first to last useful token).
    """
    ok = records.loc[records["ok"]].reset_index(drop=True)
    ids = ok["request_id"].to_numpy()
    counted = tokens.groupby("request_id").size().reindex(ids, fill_value=0).to_numpy()
    reported = ok["completion_tokens"].to_numpy()
    generated = np.where(reported >= 0, reported, counted)
    planned = ok["planned_output_tokens"].to_numpy()
    useful = np.minimum(generated, planned)
    prompt = np.where(ok["prompt_tokens"] >= 0, ok["prompt_tokens"], ok["planned_prompt_tokens"])
    first_t = _token_times(tokens, ids, np.zeros_like(useful))
    last_t = _token_times(tokens, ids, useful - 1)
    sent = ok["sent_s"].to_numpy()
    e2e = ok["end_s"].to_numpy() - sent
    span = last_t - first_t
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(useful >= 2, span / (useful - 1), np.nan)
    return pd.DataFrame(
        {
            "request_id": ids,
            "prompt_tokens": prompt.astype(np.int64),
            "generated_tokens": generated.astype(np.int64),
            "useful_tokens": useful.astype(np.int64),
            "padded": (ok["requested_output_tokens"] > ok["planned_output_tokens"]).to_numpy(),
            "ttft_s": ok["first_token_s"].to_numpy() - sent,
            "e2e_s": e2e,
            "useful_e2e_s": np.where(np.isnan(last_t), e2e, last_t - sent),
            "tpot_s": tpot,
            "useful_span_s": span,
        }
    )


def _token_times(tokens: pd.DataFrame, request_ids: np.ndarray, token_indices: np.ndarray) -> np.ndarray:
    """Arrival time of token `token_indices[i]` of request `request_ids[i]`; NaN if absent."""
    keys = pd.DataFrame({"request_id": request_ids, "token_index": token_indices})
    found = keys.merge(
        tokens[["request_id", "token_index", "t_s"]], how="left", on=["request_id", "token_index"],
        validate="many_to_one",
    )
    return found["t_s"].to_numpy(dtype=float)


def inter_token_latencies(tokens: pd.DataFrame, requests: pd.DataFrame) -> np.ndarray:
    """Gaps between consecutive useful tokens of each ok request in `requests` (first token excluded)."""
    useful = requests.set_index("request_id")["useful_tokens"]
    kept = tokens.loc[tokens["request_id"].isin(useful.index)]
    kept = kept.loc[kept["token_index"].to_numpy() < useful.reindex(kept["request_id"]).to_numpy()]
    kept = kept.sort_values(["request_id", "token_index"])
    return kept.groupby("request_id")["t_s"].diff().dropna().to_numpy()


def slo_met_mask(requests: pd.DataFrame, slo: SloMs) -> np.ndarray:
    """Which requests of `request_table` meet every SLO that is set."""
    met = np.ones(len(requests), dtype=bool)
    if slo.ttft_ms is not None:
        met &= requests["ttft_s"].to_numpy() * 1e3 <= slo.ttft_ms
    if slo.tpot_ms is not None:
        tpot = requests["tpot_s"].to_numpy()
        met &= np.isnan(tpot) | (tpot * 1e3 <= slo.tpot_ms)
    if slo.e2e_ms is not None:
        met &= requests["useful_e2e_s"].to_numpy() * 1e3 <= slo.e2e_ms
    return met


def mean_occupancy(
    telemetry: pd.DataFrame, batch_size: int, start_s: float, end_s: float, max_hold_s: float = math.inf
) -> float:
    """Time-weighted mean of running / B over [start_s, end_s]; NaN when no poll covers it."""
    if telemetry.empty:
        return math.nan
    polls = telemetry.sort_values("t")
    t = polls["t"].to_numpy(dtype=float)
    running = polls["running"].to_numpy(dtype=float)
    # Each poll's value holds from its time until the next poll (the last one until end_s).
    begins = np.clip(t, start_s, end_s)
    ends = np.clip(np.minimum(np.append(t[1:], end_s), t + max_hold_s), start_s, end_s)
    held = ends - begins
    covered = held.sum()
    if not covered > 0:
        return math.nan
    return float((running * held).sum() / (covered * batch_size))


def occupancy_series(
    telemetry: pd.DataFrame, batch_size: int, start_s: float, end_s: float, max_hold_s: float = math.inf
) -> pd.DataFrame:
    """running / B against seconds since start_s, for a step plot of the window.

    Keeps the polls inside the window, plus the last poll before it (moved to 0), whose
    value holds at the window's start, and closes with that last value at the window's end.
    Where two polls are more than `max_hold_s` apart, a NaN point at the end of the
    hold breaks the line: the state in between is unknown.
    """
    polls = telemetry.sort_values("t")
    before = polls.loc[polls["t"] < start_s].tail(1)
    inside = polls.loc[(polls["t"] >= start_s) & (polls["t"] <= end_s)]
    kept = pd.concat([before, inside])
    t = np.maximum(kept["t"].to_numpy(dtype=float) - start_s, 0.0)
    occupancy = kept["running"].to_numpy(dtype=float) / batch_size
    if t.size and t[-1] < end_s - start_s:
        t, occupancy = np.append(t, end_s - start_s), np.append(occupancy, occupancy[-1])
    gaps = np.flatnonzero(np.diff(t) > max_hold_s)
    t = np.insert(t, gaps + 1, t[gaps] + max_hold_s)
    occupancy = np.insert(occupancy, gaps + 1, np.nan)
    return pd.DataFrame({"t_s": t, "occupancy": occupancy})


def useful_slot_time_fraction(requests: pd.DataFrame, batch_size: int, makespan_s: float) -> float:
    """Slot-seconds spent producing useful tokens over B x makespan (see module docstring)."""
    if not makespan_s > 0:
        return math.nan
    return float(requests["useful_span_s"].sum() / (batch_size * makespan_s))


def error_counts(records: pd.DataFrame) -> dict[str, int]:
    """Failed requests by error message (`HTTP <status>` when the message is empty)."""
    failed = records.loc[~records["ok"]]
    counts: dict[str, int] = {}
    for error, status in zip(failed["error"], failed["status"], strict=True):
        reason = error if isinstance(error, str) and error else f"HTTP {status}"
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan
