"""The step log against vLLM's own counters for the same run: does the recorder see every step and token?

vLLM 0.32 counts on `/metrics`, in the API server's output loop (vllm/v1/metrics/loggers.py):
- `vllm:iteration_tokens_total`, a histogram observed once per batch of engine outputs
  that holds at least one request's output (vllm/v1/engine/async_llm.py builds an
  IterationStats only then). An engine step that only computed part of a prompt sends
  no output, so the histogram's count is the number of steps that sampled a token: in
  the step log, the steps with `generated` > 0;
- `vllm:generation_tokens_total`: tokens sampled (the step log's `generated`);
- `vllm:prompt_tokens_total`: prompt tokens, counted when a request's first token comes
  (the step log's `prefill`, counted as computed; equal without a prefix cache).

Each is read just before and just after a run, once the server is idle, and the
difference set against the run's steps.parquet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import httpx
import pandas as pd

from harness.errors import ServerError
from harness.telemetry.metrics import sum_series

# Sample name on /metrics -> field of EngineCounters.
SERIES = {
    "vllm:iteration_tokens_total_count": "steps",
    "vllm:generation_tokens_total": "generated_tokens",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
}
# The step log and the counters must agree this closely (a share of the counter).
MAX_DIFFERENCE = 0.005
IDLE_TIMEOUT_S = 30.0
IDLE_POLL_S = 0.2


@dataclass(frozen=True)
class EngineCounters:
    """vLLM's own totals (since it started) for steps with output, generated and prompt tokens."""

    steps: float
    generated_tokens: float
    prompt_tokens: float

    def __sub__(self, other: EngineCounters) -> EngineCounters:
        return EngineCounters(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


COMPARED = tuple(f.name for f in fields(EngineCounters))


def read_when_idle(base_url: str, timeout_s: float = IDLE_TIMEOUT_S) -> EngineCounters:
    """The counters once nothing runs or waits and two reads in a row agree.

    vLLM bumps them after it has handed a step's tokens to the streams, so a run's last
    tokens can reach the client before they are counted; settling closes that race.
    ServerError when the server does not answer or does not settle in `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    last: EngineCounters | None = None
    with httpx.Client(base_url=base_url, timeout=10) as client:
        while time.monotonic() < deadline:
            try:
                response = client.get("/metrics")
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise ServerError(f"{base_url}/metrics: {exc}") from exc
            values = sum_series(response.text, SERIES)
            counters = EngineCounters(**{name: values[name] for name in COMPARED})
            if values["running"] == 0 and values["waiting"] == 0 and counters == last:
                return counters
            last = counters
            time.sleep(IDLE_POLL_S)
    raise ServerError(f"{base_url}: still busy or counting {timeout_s:.0f} s after the run ended")


def step_log_totals(steps: pd.DataFrame) -> EngineCounters:
    """What a run's steps.parquet says vLLM's counters should have grown by."""
    return EngineCounters(
        steps=float((steps["generated_tokens"] > 0).sum()),
        generated_tokens=float(steps["generated_tokens"].sum()),
        prompt_tokens=float(steps["prefill_tokens"].sum()),
    )


@dataclass(frozen=True)
class CounterComparison:
    """One run: vLLM's counters grew by `counted`, its steps.parquet says `logged`."""

    run: str
    counted: EngineCounters
    logged: EngineCounters

    def difference(self, name: str) -> float:
        """|logged - counted| as a share of counted (0 when both are 0, inf when only the counter is)."""
        counted, logged = getattr(self.counted, name), getattr(self.logged, name)
        if counted == 0:
            return 0.0 if logged == 0 else float("inf")
        return abs(logged - counted) / counted


def worst(comparisons: list[CounterComparison], name: str) -> CounterComparison:
    """The run whose step log is furthest from the counter `name`."""
    return max(comparisons, key=lambda comparison: comparison.difference(name))
