"""Server telemetry: poll vLLM's Prometheus `/metrics` while a run goes.

Samples are stamped with `time.time()`, the same clock as the request records, so
the analysis can line up "requests running" with each request's timings. Polls are
paced on `time.monotonic()`. Both clocks, the wait between polls and the HTTP
transport can be swapped, so tests run on simulated time without a server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.rundir.records import TELEMETRY_FIELDS

# How often /metrics is polled unless the caller says (run --telemetry-interval-s).
TELEMETRY_INTERVAL_S = 0.25
# Sample name in /metrics -> column name in telemetry tables.
GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
}
COUNTERS = {
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:num_preemptions_total": "preemptions_total",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits_total",
}


@dataclass(frozen=True)
class TelemetrySample:
    """One poll of /metrics; values summed over label sets (engines, models)."""

    t: float
    running: float
    waiting: float
    kv_cache_usage: float
    generation_tokens_total: float
    prompt_tokens_total: float
    preemptions_total: float
    prefix_cache_queries_total: float
    prefix_cache_hits_total: float
    # How long /metrics took to answer: a starved API server answers late.
    latency_s: float = float("nan")


TELEMETRY_COLUMNS = tuple(TelemetrySample.__dataclass_fields__)
# The schema (harness.rundir.records) is the reference; the sampler follows it.
assert tuple(TELEMETRY_FIELDS) == TELEMETRY_COLUMNS, "sampler out of step with the telemetry schema"


_WANTED = {**GAUGES, **COUNTERS}
_WANTED_FAMILIES = {name.removesuffix("_total") for name in _WANTED}


def _wanted_lines(text: str) -> str:
    """Only the lines of the families we track.

    vLLM exposes tens of KB of histograms, and parsing all of them costs milliseconds of
    client CPU per poll (docs/validation/client-ceiling.md), which a client sharing two
    cores with the server cannot spare.
    """
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(maxsplit=3)
            name = parts[2] if len(parts) > 2 else ""
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.removesuffix("_total") in _WANTED_FAMILIES:
            kept.append(line)
    return "\n".join(kept) + "\n"


def sum_series(text: str, series: Mapping[str, str]) -> dict[str, float]:
    """Each wanted sample of an exposition, summed over its label sets (engines, models).

    `series` maps a sample name (e.g. `vllm:request_queue_time_seconds_sum`) to the key
    it is returned under; a sample absent from the text reads 0.
    """
    values = dict.fromkeys(series.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = series.get(sample.name)
            if key is not None:
                values[key] += sample.value
    return values


def parse_metrics(text: str, t: float) -> TelemetrySample:
    """Pick the vLLM gauges and counters we track out of a Prometheus text exposition."""
    return TelemetrySample(t=t, **sum_series(_wanted_lines(text), _WANTED))


class TelemetrySampler:
    """A background thread that polls `/metrics` every `interval_s` until stopped.

    A failed poll (server busy or gone) is counted in `errors`, not raised: the run's
    records say what happened to requests; telemetry is best effort.
    """

    def __init__(
        self,
        base_url: str,
        interval_s: float = TELEMETRY_INTERVAL_S,
        headers: dict[str, str] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        wait: Callable[[threading.Event, float], bool] = threading.Event.wait,
    ) -> None:
        """Poll `base_url`/metrics every `interval_s` once started.

        `clock` stamps the samples (the records' wall clock); `timer` paces the polls and
        times their latency; `wait(stop_event, seconds)` waits between polls (returning
        early once stopped); `transport` carries the requests (default: the network).
        """
        self.base_url = base_url.rstrip("/")
        self.interval_s = interval_s
        self.samples: list[TelemetrySample] = []
        self.errors = 0
        self._clock = clock
        self._timer = timer
        self._wait = wait
        # Built here, not in the thread: client creation costs tens of ms of CPU.
        self._client = httpx.Client(timeout=max(2.0, interval_s * 4), headers=headers or {}, transport=transport)
        self._stop = threading.Event()
        self._first_poll = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)

    def start(self) -> TelemetrySampler:
        """Start polling; returns once the first poll is done, so the run start is covered."""
        self._thread.start()
        self._first_poll.wait(timeout=10)
        return self

    def stop(self) -> list[TelemetrySample]:
        """Take a last poll, stop, and return every sample taken (once started; else none)."""
        self._stop.set()
        if self._thread.ident is None:
            # Never started: the thread that would close the client never ran.
            self._client.close()
        else:
            self._thread.join()
        return self.samples

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _loop(self) -> None:
        with self._client as client:
            next_poll = self._timer()
            while True:
                self._poll(client)
                self._first_poll.set()
                # The poll after stop() covers the run's end, as the first covers its start.
                if self._stop.is_set():
                    break
                next_poll += self.interval_s
                self._wait(self._stop, max(0.0, next_poll - self._timer()))

    def _poll(self, client: httpx.Client) -> None:
        asked = self._timer()
        try:
            response = client.get(f"{self.base_url}/metrics")
            response.raise_for_status()
            sample = parse_metrics(response.text, self._clock())
            self.samples.append(replace(sample, latency_s=self._timer() - asked))
        except (httpx.HTTPError, ValueError):
            self.errors += 1

    def as_rows(self) -> list[dict[str, float]]:
        """Samples as plain dicts (one per poll), columns as in TELEMETRY_COLUMNS."""
        return [asdict(sample) for sample in self.samples]
