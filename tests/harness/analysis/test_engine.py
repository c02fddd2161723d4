"""Engine-side figures from a hand-built steps table, every expected number worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.engine import (
    EngineMetrics,
    client_engine_disagreement,
    engine_metrics,
    front_end_starved_share,
    occupancy_steps,
    request_spans,
    step_seconds,
)
from harness.rundir.records import STEP_FIELDS


def steps_table(rows):
    """A steps frame with every STEP_FIELDS column; rows give (t_s, end_s, running, generated_tokens)."""
    frame = pd.DataFrame(
        [
            {
                "t_s": t, "end_s": end, "running": running, "waiting": 0, "prefill_tokens": 0,
                "decode_tokens": generated, "context_tokens": 0, "generated_tokens": generated,
                "admitted": [], "finished": [],
            }
            for t, end, running, generated in rows
        ],
        columns=list(STEP_FIELDS),
    )
    return frame


# Four steps, deliberately out of order. Sorted by start:
#   t=0 ..0.5 running 2 gen 2 | t=1 ..1.5 running 4 gen 4 | t=2 ..3 running 4 gen 4 | t=4 ..5 running 1 gen 1
FOUR = [(2.0, 3.0, 4, 4), (0.0, 0.5, 2, 2), (4.0, 5.0, 1, 1), (1.0, 1.5, 4, 4)]


def test_four_steps_give_exact_figures():
    m = engine_metrics(steps_table(FOUR), batch_size=4)
    assert m.steps == 4
    assert m.makespan_s == pytest.approx(5.0)  # first start 0 to last end 5
    assert m.generated_tokens == 11
    assert m.generated_tok_s == pytest.approx(11 / 5)
    # Each step's batch holds until the next step starts (the last until the window ends):
    # held 1, 1, 2, 1 s -> (2*1 + 4*1 + 4*2 + 1*1) / (4 * 5) = 15 / 20.
    assert m.mean_occupancy == pytest.approx(0.75)
    # Step durations 0.5, 0.5, 1, 1.
    assert m.median_step_s == pytest.approx(0.75)


def test_step_seconds_under_a_batch_queue_count_each_step_once():
    # Async scheduling: each step is scheduled 0.2 s before the previous one ends, and each
    # runs 1 s once the GPU is free. end - t would be 1.2 s; each step's own time is 1 s.
    queued = [(0.0, 1.0, 4, 4), (0.8, 2.0, 4, 4), (1.8, 3.0, 4, 4), (3.5, 4.0, 1, 1)]
    assert step_seconds(steps_table(queued)).tolist() == pytest.approx([1.0, 1.0, 1.0, 0.5])
    assert engine_metrics(steps_table(queued), batch_size=4).median_step_s == pytest.approx(1.0)


def test_occupancy_counts_idle_gaps_not_just_step_durations():
    # Two steps of 0.1 s each, 10 s apart: the first batch of 4 is held for 10 s, the second (1) for 0.1 s.
    m = engine_metrics(steps_table([(0.0, 0.1, 4, 4), (10.0, 10.1, 1, 1)]), batch_size=4)
    assert m.mean_occupancy == pytest.approx((4 * 10.0 + 1 * 0.1) / (4 * 10.1))
    assert m.makespan_s == pytest.approx(10.1)


def test_occupancy_scales_with_batch_size():
    full = engine_metrics(steps_table(FOUR), batch_size=4).mean_occupancy
    assert engine_metrics(steps_table(FOUR), batch_size=8).mean_occupancy == pytest.approx(full / 2)


def test_occupancy_steps_are_sorted_by_start():
    times, running = occupancy_steps(steps_table(FOUR))
    np.testing.assert_array_equal(times, [0.0, 1.0, 2.0, 4.0])
    np.testing.assert_array_equal(running, [2, 4, 4, 1])
    assert times.dtype == np.float64 and running.dtype == np.float64


def test_empty_table_gives_nan():
    m = engine_metrics(steps_table([]), batch_size=4)
    assert m.steps == 0 and m.generated_tokens == 0
    assert math.isnan(m.makespan_s)
    assert math.isnan(m.generated_tok_s)
    assert math.isnan(m.mean_occupancy)
    assert math.isnan(m.median_step_s)


def test_zero_length_window_gives_nan_rates():
    m = engine_metrics(steps_table([(3.0, 3.0, 2, 2)]), batch_size=4)
    assert m.steps == 1 and m.makespan_s == 0.0 and m.generated_tokens == 2
    assert math.isnan(m.generated_tok_s)
    assert math.isnan(m.mean_occupancy)


def engine_at(tok_s: float) -> EngineMetrics:
    return EngineMetrics(steps=10, makespan_s=10.0, generated_tokens=1000, generated_tok_s=tok_s,
                         mean_occupancy=0.5, median_step_s=0.1)


def test_disagreement_sign_and_size():
    assert client_engine_disagreement(101.0, engine_at(100.0)) == pytest.approx(0.01)
    assert client_engine_disagreement(97.0, engine_at(100.0)) == pytest.approx(-0.03)
    assert client_engine_disagreement(100.0, engine_at(100.0)) == 0.0


def test_disagreement_matches_the_engine_metrics_of_a_table():
    m = engine_metrics(steps_table(FOUR), batch_size=4)
    assert client_engine_disagreement(2.2 * 0.9, m) == pytest.approx(-0.1)


@pytest.mark.parametrize("engine_tok_s", [math.nan, math.inf, 0.0, -1.0])
def test_disagreement_is_nan_when_the_engine_figure_is_unknown(engine_tok_s):
    assert math.isnan(client_engine_disagreement(100.0, engine_at(engine_tok_s)))


def test_disagreement_is_nan_for_an_empty_steps_table():
    assert math.isnan(client_engine_disagreement(100.0, engine_metrics(steps_table([]), batch_size=4)))


def queue_steps(rows):
    """Steps of B=2 from (t_s, end_s, running, waiting, admitted ids)."""
    frame = steps_table([(t, end, running, running) for t, end, running, _, _ in rows])
    frame["waiting"] = [waiting for *_, waiting, _ in rows]
    frame["admitted"] = [admitted for *_, admitted in rows]
    return frame


# Windows held: [0,1) [1,2) [2,4) [4,5): the last step ends at 5.
QUEUE = [(0.0, 0.5, 1, 0, [0]), (1.0, 1.5, 1, 0, []), (2.0, 3.0, 2, 0, [1]), (4.0, 5.0, 1, 0, [])]


def test_a_free_slot_while_a_sent_request_is_missing_counts_as_starved():
    # Request 1 was sent at 0.5 but only admitted at 2: the steps at 1 (free slot, nothing
    # waiting, one request sent and not arrived) starve, 1 s of the 5 s window.
    assert front_end_starved_share(queue_steps(QUEUE), np.array([0.0, 0.5]), batch_size=2) == pytest.approx(0.2)


def test_a_free_slot_with_nothing_sent_is_not_starvation():
    # Request 1 sent at 1.99: it is the client's plan that left the slot free, not the front end.
    assert front_end_starved_share(queue_steps(QUEUE), np.array([0.0, 1.99]), batch_size=2) == 0.0


def test_a_request_within_the_grace_period_does_not_count():
    # Sent 30 ms before the step at 1.0: still on its way through the API server.
    assert front_end_starved_share(queue_steps(QUEUE), np.array([0.0, 0.97]), batch_size=2) == 0.0


def test_requests_waiting_in_the_engine_are_not_in_the_front_end():
    # Static draining: one running, one waiting in the engine (held back by the scheduler),
    # none left in the front end: a free slot, but the front end did not cause it.
    draining = [(0.0, 1.0, 2, 1, [0, 1]), (1.0, 2.0, 1, 1, []), (2.0, 3.0, 1, 0, [2])]
    assert front_end_starved_share(queue_steps(draining), np.array([0.0, 0.0, 0.0]), batch_size=3) == 0.0


def test_a_full_batch_or_a_queue_is_never_starved():
    full = [(0.0, 1.0, 2, 0, [0, 1]), (1.0, 2.0, 1, 1, [])]
    assert front_end_starved_share(queue_steps(full), np.array([0.0, 0.0, 0.0]), batch_size=2) == 0.0


def test_starvation_is_nan_without_steps():
    assert math.isnan(front_end_starved_share(steps_table([]), np.array([0.0]), batch_size=2))


def test_request_spans_run_from_the_admitting_step_to_the_finishing_one():
    steps = steps_table([(0.0, 0.1, 1, 1), (0.1, 0.2, 2, 2), (0.2, 0.3, 2, 2), (0.3, 0.4, 1, 1)])
    steps["admitted"] = [["a"], ["b"], [], []]
    steps["finished"] = [["x"], [], ["a"], ["b"]]
    spans = request_spans(steps).set_index("request")
    # "x" was admitted before the window: no span.
    assert sorted(spans.index) == ["a", "b"]
    assert spans.loc["a"].tolist() == pytest.approx([0.1, 0.3])
    assert spans.loc["b"].tolist() == pytest.approx([0.2, 0.4])
