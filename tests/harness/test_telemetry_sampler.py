"""The sampler's polling: the run's start and end are both covered, failures counted."""

from __future__ import annotations

import itertools
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.telemetry import TelemetrySampler


class CountingMetrics(BaseHTTPRequestHandler):
    """Serves an exposition whose token counter goes up by one per scrape."""

    scrapes = itertools.count(1)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        body = f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total {next(self.scrapes)}.0\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def metrics_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), CountingMetrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_polls_once_at_start_and_once_after_stop(metrics_url):
    sampler = TelemetrySampler(metrics_url, interval_s=10.0).start()
    assert len(sampler.samples) == 1  # start() returns once the first poll is in
    stopped_at = time.time()
    samples = sampler.stop()
    assert len(samples) == 2 and samples[-1].t >= stopped_at
    assert samples[-1].generation_tokens_total > samples[0].generation_tokens_total


def test_polls_on_the_interval_in_between(metrics_url):
    started = time.monotonic()
    with TelemetrySampler(metrics_url, interval_s=0.05) as sampler:
        time.sleep(0.5)
        # On a loaded machine a poll can outlast the sleep: wait (bounded) for one in between.
        deadline = time.monotonic() + 30
        while len(sampler.samples) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    elapsed = time.monotonic() - started
    # Start, end and polls between; never faster than the interval (elapsed / interval + 2).
    assert 3 <= len(sampler.samples) <= elapsed / 0.05 + 2
    assert sampler.errors == 0


def test_an_unreachable_server_is_counted_not_raised():
    sampler = TelemetrySampler("http://127.0.0.1:9", interval_s=0.05).start()
    assert sampler.stop() == [] and sampler.errors >= 2
