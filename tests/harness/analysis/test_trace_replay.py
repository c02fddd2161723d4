"""A trace replay's shape and latency from arrival, on hand-made rows (harness.analysis.trace_replay)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.trace_replay import TraceShape, latency_from_arrival
from harness.rundir.reader import RunData

T0 = 1000.0


def test_the_shape_of_a_trace_its_rates_spread_and_the_slots_batches_would_waste():
    # A burst of 12 in the first 2 s, then one request every 10 s.
    arrivals = np.concatenate([np.linspace(0, 2, 12), 2 + 10 * np.arange(1, 9)])
    outputs = np.tile([1, 4, 2, 4], 5)
    shape = TraceShape("t.csv", arrivals, np.full(20, 8), outputs, batch_size=2)
    assert shape.span_s == pytest.approx(82)
    assert shape.mean_rate == pytest.approx(19 / 82)
    # The busiest 10 s holds the burst of 12 (the next arrival is 10 s after its last).
    assert shape.peak_rate == pytest.approx(1.2)
    # In arrival order by twos: [1, 4] and [2, 4] hold 16 slots for 11 useful tokens, five times over.
    assert shape.wave_slot_share == pytest.approx(11 / 16)
    assert shape.output_cv == pytest.approx(np.std(outputs) / np.mean(outputs))


def _run(arrivals, scheduled, ends, firsts, steps=None) -> RunData:
    n = len(arrivals)
    records = pd.DataFrame({"request_id": range(n), "scheduled_s": scheduled, "sent_s": scheduled, "end_s": ends,
                            "first_token_s": firsts, "ok": [True] * (n - 1) + [False]})
    plan = {"requests": [{"index": i, "arrival_s": a, "prompt_tokens": 4, "output_tokens": 2}
                         for i, a in enumerate(arrivals)]}
    return RunData(path=Path("run"), manifest=None, records=records, tokens=pd.DataFrame(),  # type: ignore[arg-type]
                   telemetry=pd.DataFrame(), plan=plan, steps=steps)


def test_latency_is_measured_from_each_rows_arrival_not_its_send():
    arrivals = [0.0, 0.5, 1.0, 3.0]
    # Naive's waves of two go out when their last member has arrived: at 0.5 and, after the first wave
    # ends at 2.5, at 3.0. The first request waited half a second for its wave before it was sent.
    scheduled = T0 + np.array([0.5, 0.5, 3.0, 3.0])
    ends = T0 + np.array([2.0, 2.5, 4.0, 4.5])
    data = _run(arrivals, scheduled, ends, ends - 0.25)
    latency = latency_from_arrival(data)
    assert latency.index.tolist() == [0, 1, 2]  # the failed row is left out
    np.testing.assert_allclose(latency["e2e_s"], [2.0, 2.0, 3.0])
    np.testing.assert_allclose(latency["ttft_s"], [1.75, 1.75, 2.75])
    assert latency["queue_wait_s"].isna().all()  # no step log


def test_the_queue_wait_comes_from_the_engines_admissions():
    arrivals = [0.0, 1.0, 2.0]
    scheduled = T0 + np.array(arrivals)
    steps = pd.DataFrame({"t_s": [T0 + 0.1, T0 + 1.5, T0 + 2.0], "admitted": [[0], [1], [2]]})
    data = _run(arrivals, scheduled, scheduled + 1, scheduled + 0.2, steps)
    latency = latency_from_arrival(data)
    np.testing.assert_allclose(latency["queue_wait_s"], [0.1, 0.5])
    np.testing.assert_allclose(latency["e2e_s"], [1.0, 1.0])


def test_a_later_turn_of_a_conversation_is_measured_from_its_schedule_not_its_trace_arrival():
    arrivals = [0.0, 0.1, 5.0]
    # Turn 2 (row 1) was due when turn 1's answer ended at 2.0 plus 1 s of thinking.
    scheduled = T0 + np.array([0.0, 3.0, 5.0])
    ends = T0 + np.array([2.0, 4.5, 6.0])
    data = _run(arrivals, scheduled, ends, ends - 0.5)
    data.records["after"] = [-1, 0, -1]
    latency = latency_from_arrival(data)
    np.testing.assert_allclose(latency["e2e_s"], [2.0, 1.5])
