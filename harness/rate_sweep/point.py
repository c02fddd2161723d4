"""One Poisson run as a point on a latency curve (pure: tables in, figures out).

The measured requests are those planned to arrive after the warm-up. Their figures:
- client latencies (harness.analysis.metrics.request_table): TTFT and E2E, p50 and p99,
  and the median normalized latency, E2E per output token (vLLM's paper's measure): each
  rate's plan draws its own output lengths, and a median of E2E alone moves with them;
- queue wait, from the engine's step log: the start of the step that first admitted the
  request minus its send time (one machine, one wall clock). This is "waits at the door":
  the time a request spends queued before any of its work begins;
- whether the system kept up. A queue that is stable fluctuates around a level; one that
  is not grows for the whole run. Its wait (the engine's queue wait, else the client's
  TTFT) is regressed on arrival time (Theil-Sen, robust to the odd long prompt); the run
  did not keep up when the wait grew over the measured window by more than
  WAIT_GROWTH_LIMIT_S, even at the low end of the slope's 95% interval. The interval is
  what tells a trend from a static queue's sawtooth (a batch's worth of waits rises and
  falls every batch): a point estimate flipped either way just below static's saturation.
  The level the queue reached in the warm-up does not excuse a growth. Such a point's
  latencies reflect the run's length, not the rate, and are shown as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import theilslopes

from harness.analysis.engine import queue_waits
from harness.analysis.metrics import Percentiles, request_table
from harness.analysis.stats import Estimate, median_ci

# A queue that grew by less than this over a run's measured window is a fluctuation, not a backlog.
WAIT_GROWTH_LIMIT_S = 0.5


@dataclass(frozen=True)
class RatePoint:
    """What one run at one offered rate measured. Times in seconds; NaN where undefined."""

    system: str
    offered_rate: float  # requests/s the workload asked for
    planned_rate: float  # requests/s the plan's Poisson draw holds in the measured window
    sent_rate: float  # requests/s the client sent them at: below planned_rate when it fell behind
    late_p99_s: float  # p99 of how late the client sent the measured requests
    measured: int  # requests planned to arrive in the measured window
    failed: int  # of those, requests that did not complete
    ttft_p50_s: float
    ttft_p99_s: float
    e2e_p50_s: float
    e2e_p50_low_s: float  # 95% bootstrap interval of the median E2E, over the run's requests
    e2e_p50_high_s: float
    e2e_p99_s: float
    normalized_p50_s: float  # median over requests of E2E / output tokens (seconds per token)
    queue_wait_p50_s: float  # from the engine's step log; NaN without one
    queue_wait_p99_s: float
    wait_growth_s: float  # how much the queue's wait grew over the measured window (Theil-Sen)
    wait_growth_low_s: float  # the low end of its 95% interval: above WAIT_GROWTH_LIMIT_S, the queue did not keep up
    # Simulated from a step cost fitted on the same server's other runs (harness.rate_sweep.predict); NaN: none.
    predicted_e2e_p50_s: float = math.nan
    predicted_ttft_p50_s: float = math.nan
    # The run's own steps against that fit (measured over modelled seconds), and the prediction at that speed.
    run_speed: float = math.nan
    predicted_e2e_p50_at_run_speed_s: float = math.nan

    @property
    def keeps_up(self) -> bool:
        """Whether the queue was stable (an unknown growth counts as stable)."""
        return not self.wait_growth_low_s > WAIT_GROWTH_LIMIT_S

    @property
    def prediction_error(self) -> float:
        """Measured p50 E2E over predicted, minus 1 (NaN without a prediction)."""
        return _relative(self.e2e_p50_s, self.predicted_e2e_p50_s)

    @property
    def prediction_error_at_run_speed(self) -> float:
        """Measured p50 E2E over the prediction at the run's own step speed, minus 1 (NaN without one)."""
        return _relative(self.e2e_p50_s, self.predicted_e2e_p50_at_run_speed_s)

    @property
    def normalized_at_fit_speed_s(self) -> float:
        """normalized_p50_s at the speed of the step cost fitted on the server's other runs: divided by run_speed
        where known, so that the knee follows the load and not the machine's speed, which moves from run to run
        (docs/validation/rate-sweep.md)."""
        return self.normalized_p50_s / self.run_speed if self.run_speed > 0 else self.normalized_p50_s

    @property
    def growth_ratio(self) -> float:
        """The wait's surest growth over its limit: above 1, the queue did not keep up (0 when it shrank or is
        unknown)."""
        low = self.wait_growth_low_s
        return max(0.0, low / WAIT_GROWTH_LIMIT_S) if math.isfinite(low) else 0.0


def measured_window(records: pd.DataFrame, warmup_s: float) -> pd.DataFrame:
    """The records of the requests planned to arrive at or after `warmup_s` into the run."""
    return records.loc[records["scheduled_s"] - records["scheduled_s"].min() >= warmup_s]


@dataclass(frozen=True, eq=False)
class RequestLatencies:
    """The measured requests of one run, one entry each, in seconds (NaN where unknown).

    Filled from a run's records (measure_point) or from a schedule simulated on paper
    (harness.rate_sweep.on_paper); the point is read from it the same way.
    """

    arrival_s: np.ndarray  # planned arrival, from the run's start
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    output_tokens: np.ndarray
    queue_wait_s: np.ndarray  # NaN without an engine step log


def measure_point(system: str, offered_rate: float, records: pd.DataFrame, tokens: pd.DataFrame,
                  steps: pd.DataFrame | None, warmup_s: float) -> RatePoint:
    """The point of one run: requests planned after `warmup_s` are measured, the rest left out."""
    start = float(records["scheduled_s"].min())
    window = measured_window(records, warmup_s)
    requests = request_table(window, tokens).set_index("request_id")
    waits = queue_waits(window, steps) if steps is not None else pd.Series(dtype=float)
    arrivals = window.set_index("request_id")["scheduled_s"] - start
    latencies = RequestLatencies(
        arrival_s=arrivals.reindex(requests.index).to_numpy(dtype=float),
        ttft_s=requests["ttft_s"].to_numpy(dtype=float),
        e2e_s=requests["e2e_s"].to_numpy(dtype=float),
        output_tokens=requests["useful_tokens"].to_numpy(dtype=float),
        queue_wait_s=waits.reindex(requests.index).to_numpy(dtype=float),
    )
    return latency_point(
        system, offered_rate, latencies, float(records["scheduled_s"].max()) - start - warmup_s,
        planned_rate=_rate(window["scheduled_s"]), sent_rate=_rate(window["sent_s"]),
        late_p99_s=Percentiles.of(window["lateness_s"]).p99, measured=len(window), failed=int((~window["ok"]).sum()),
    )


def latency_point(system: str, offered_rate: float, requests: RequestLatencies, window_s: float, *,
                  planned_rate: float, sent_rate: float, late_p99_s: float, measured: int, failed: int) -> RatePoint:
    """One rate's point from its measured requests; `window_s`: the measured window's seconds of arrivals."""
    # The wait whose growth says whether the queue is stable: the engine's, else the client's TTFT.
    wait = requests.queue_wait_s if np.isfinite(requests.queue_wait_s).any() else requests.ttft_s
    growth, growth_low = _growth(requests.arrival_s, wait, window_s)
    e2e = _median_interval(pd.Series(requests.e2e_s))
    ttft, e2e_spread = Percentiles.of(requests.ttft_s), Percentiles.of(requests.e2e_s)
    queued = Percentiles.of(requests.queue_wait_s)
    return RatePoint(
        system=system,
        offered_rate=offered_rate,
        planned_rate=planned_rate,
        sent_rate=sent_rate,
        late_p99_s=late_p99_s,
        measured=measured,
        failed=failed,
        ttft_p50_s=ttft.p50,
        ttft_p99_s=ttft.p99,
        e2e_p50_s=e2e.point,
        e2e_p50_low_s=e2e.low,
        e2e_p50_high_s=e2e.high,
        e2e_p99_s=e2e_spread.p99,
        normalized_p50_s=Percentiles.of(requests.e2e_s / np.clip(requests.output_tokens, 1, None)).p50,
        queue_wait_p50_s=queued.p50,
        queue_wait_p99_s=queued.p99,
        wait_growth_s=growth,
        wait_growth_low_s=growth_low,
    )


def _growth(arrival_s: np.ndarray, wait_s: np.ndarray, window_s: float) -> tuple[float, float]:
    """(growth of the wait over the window, the low end of its 95% interval): NaN with too few requests."""
    keep = np.isfinite(arrival_s) & np.isfinite(wait_s)
    if keep.sum() < 3 or window_s <= 0:
        return math.nan, math.nan
    fit = theilslopes(wait_s[keep], arrival_s[keep], alpha=0.95)
    return float(fit.slope * window_s), float(fit.low_slope * window_s)


def _rate(times: pd.Series) -> float:
    """Events per second between the first and the last of `times` (NaN for fewer than two)."""
    finite = times.dropna()
    span = float(finite.max() - finite.min()) if len(finite) > 1 else 0.0
    return (len(finite) - 1) / span if span > 0 else math.nan


def _median_interval(values: pd.Series) -> Estimate:
    finite = values.dropna()
    if finite.empty:
        return Estimate(math.nan, math.nan, math.nan, 0, "no values")
    return median_ci(finite.to_numpy(dtype=float))


def _relative(measured: float, predicted: float) -> float:
    return measured / predicted - 1.0 if predicted > 0 else math.nan
