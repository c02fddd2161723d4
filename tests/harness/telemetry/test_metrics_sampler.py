"""The sampler's polling: the run's start and end are both covered, failures counted.

The polls go to an in-process /metrics (httpx.MockTransport) on simulated time, so the
counts asserted do not depend on how fast a loaded machine runs the sampler's thread.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from harness.telemetry.metrics import TelemetrySampler

URL = "http://vllm.test"


def counting_metrics() -> httpx.MockTransport:
    """A /metrics whose token counter goes up by one per scrape."""
    scrapes = itertools.count(1)

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics"
        body = f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total {next(scrapes)}.0\n"
        return httpx.Response(200, text=body, headers={"Content-Type": "text/plain"})

    return httpx.MockTransport(answer)


def sampler_on(time_: Any, interval_s: float) -> TelemetrySampler:
    return TelemetrySampler(
        URL, interval_s=interval_s, transport=counting_metrics(), clock=time_, timer=time_, wait=time_.wait
    )


def test_polls_once_at_start_and_once_after_stop(sampler_time):
    time_ = sampler_time(horizon_s=0.0)
    sampler = sampler_on(time_, interval_s=10.0).start()
    assert len(sampler.samples) == 1  # start() returns once the first poll is in
    assert time_.parked.wait(timeout=30)
    time_.now += 5.0
    stopped_at = time_.now
    samples = sampler.stop()
    assert len(samples) == 2 and samples[-1].t >= stopped_at
    assert samples[-1].generation_tokens_total > samples[0].generation_tokens_total


def test_polls_on_the_interval_in_between(sampler_time):
    time_ = sampler_time(horizon_s=0.52)
    started = time_.now
    with sampler_on(time_, interval_s=0.05) as sampler:
        assert time_.parked.wait(timeout=30)
    elapsed = time_.now - started
    # Start, end and polls between; never faster than the interval (elapsed / interval + 2).
    assert 3 <= len(sampler.samples) <= elapsed / 0.05 + 2
    assert sampler.errors == 0


def test_an_unreachable_server_is_counted_not_raised():
    sampler = TelemetrySampler("http://127.0.0.1:9", interval_s=0.05).start()
    assert sampler.stop() == [] and sampler.errors >= 2


def test_a_sampler_stopped_before_it_started_closes_its_client():
    sampler = TelemetrySampler(URL, transport=counting_metrics())
    assert sampler.stop() == []
    assert sampler._client.is_closed
