"""Which runs a rate sweep makes: a saturation burst, then runs at rates on a grid: Poisson arrivals, or a
trace's own arrivals scaled to each rate (pure)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.rate_sweep.defaults import DEFAULT_FRACTIONS, MEASURE_S, WARMUP_S
from harness.workload import BurstArrival, PoissonArrival, WorkloadSpec

# Per run beyond its arrivals: prompts, the client's start, the last requests draining (s; ~2-4 s measured here).
RUN_OVERHEAD_S = 6.0
# Saturation: requests per second up to the 90th percentile finish of a burst, so the tail
# (the last long requests running alone) does not drag the rate down.
SATURATION_QUANTILE = 0.9


def burst_spec(spec: WorkloadSpec, requests: int) -> WorkloadSpec:
    """`spec` sent as one burst of `requests` (a trace's first rows, with their lengths): the saturation run."""
    return spec.model_copy(update={"name": f"{spec.name}-burst", "num_requests": requests, "duration_s": None,
                                   "arrival": BurstArrival()})


def rate_spec(spec: WorkloadSpec, rate: float, warmup_s: float = WARMUP_S,
              measure_s: float = MEASURE_S) -> WorkloadSpec:
    """`spec` arriving at `rate` requests/s for warm-up plus measured seconds.

    A synthetic workload gets Poisson arrivals, keeping its burstiness when it already
    arrives as a gamma process. A trace keeps its own arrivals' shape: its first
    rate x seconds rows, compressed or stretched to that mean rate (TraceSource.rate). The
    name carries the rate, so each rate's runs have their own directories.
    """
    name = f"{spec.name}-at-{rate:.2f}rps"
    if spec.trace is not None:
        trace = spec.trace.model_copy(update={"rate": rate, "time_scale": 1.0})
        return spec.model_copy(update={"name": name, "num_requests": max(2, math.ceil(rate * (warmup_s + measure_s))),
                                       "trace": trace})
    burstiness = spec.arrival.burstiness if isinstance(spec.arrival, PoissonArrival) else 1.0
    return spec.model_copy(update={
        "name": name, "num_requests": None, "duration_s": warmup_s + measure_s,
        "arrival": PoissonArrival(rate=rate, burstiness=burstiness),
    })


def offered_rate(spec: WorkloadSpec) -> float:
    """The rate a sweep's run was offered (rate_spec's): its Poisson rate or its trace's; NaN for neither."""
    if isinstance(spec.arrival, PoissonArrival):
        return float(spec.arrival.rate)
    if spec.trace is not None and spec.trace.rate is not None:
        return float(spec.trace.rate)
    return math.nan


def saturation_rate(records: pd.DataFrame) -> float:
    """Requests per second a burst was served at: ok requests up to the 90th percentile finish,
    over the time from the first send to that finish. NaN when nothing finished."""
    ok = records.loc[records["ok"]]
    if ok.empty:
        return math.nan
    ends = np.sort(ok["end_s"].to_numpy(dtype=float))
    count = max(1, math.ceil(SATURATION_QUANTILE * len(ends)))
    elapsed = ends[count - 1] - float(records["sent_s"].min())
    return count / elapsed if elapsed > 0 else math.nan


def rate_grid(saturation: float, fractions: tuple[float, ...] = DEFAULT_FRACTIONS) -> list[float]:
    """The offered rates: each fraction of `saturation`, rounded to 0.01 requests/s, ascending, distinct."""
    if not (math.isfinite(saturation) and saturation > 0):
        raise ValueError(f"saturation rate must be a positive number, got {saturation!r}")
    return sorted({round(saturation * fraction, 2) for fraction in fractions if saturation * fraction >= 0.01})


def expected_run_s(rate: float, saturation: float, arrivals_s: float) -> float:
    """A run's expected wall time: its arrivals, the backlog it cannot serve meanwhile, and overhead.

    Offered past its saturation, a system serves rate/saturation - 1 of the arrivals' time again
    after the last arrival.
    """
    return arrivals_s * _stretch(rate, saturation) + RUN_OVERHEAD_S


def measure_for_budget(seconds: float, runs: list[tuple[float, float]], warmup_s: float) -> float:
    """The measured seconds per run that make `runs` ((rate, its system's saturation) each) take `seconds`.

    Solves sum(expected_run_s(rate, saturation, warmup_s + m)) = seconds for m (may be negative:
    the budget cannot hold even the warm-ups).
    """
    growth = [_stretch(rate, saturation) for rate, saturation in runs]
    fixed = sum(factor * warmup_s + RUN_OVERHEAD_S for factor in growth)
    return (seconds - fixed) / sum(growth)


def _stretch(rate: float, saturation: float) -> float:
    """How much longer than its arrivals a run lasts: 1, plus the backlog's share past saturation."""
    return 1.0 + max(0.0, rate / saturation - 1.0) if saturation > 0 else 1.0
