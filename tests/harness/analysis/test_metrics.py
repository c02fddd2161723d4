"""Per-run metrics on tiny hand-built tables, every expected number worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from harness.analysis.metrics import (
    Percentiles,
    compute_run_metrics,
    mean_occupancy,
    occupancy_series,
    request_table,
)
from harness.rundir.records import RECORD_SCHEMA, TELEMETRY_SCHEMA, TOKEN_SCHEMA
from harness.workload.spec import SloMs


def record(request_id, *, planned, tokens_at, sent=100.0, end=None, requested=None, prompt=10, ok=True,
           completion=None, lateness=0.0, error="", status=200, mismatch=False):
    """One records row; first_token_s and completion_tokens follow from `tokens_at`."""
    return {
        "request_id": request_id,
        "worker": "w:1",
        "planned_prompt_tokens": prompt,
        "planned_output_tokens": planned,
        "requested_output_tokens": requested or planned,
        "wave": -1,
        "scheduled_s": sent - lateness,
        "sent_s": sent,
        "lateness_s": lateness,
        "first_token_s": tokens_at[0] if tokens_at else math.nan,
        "end_s": end if end is not None else tokens_at[-1],
        "prompt_tokens": prompt if ok else -1,
        "completion_tokens": completion if completion is not None else (len(tokens_at) if ok else -1),
        "status": status,
        "error": error,
        "ok": ok,
        "length_mismatch": mismatch,
    }


def tables(rows, token_times, polls=()):
    """records, tokens, telemetry frames typed exactly as the run's parquet files load."""
    tokens = [
        {"request_id": rid, "token_index": i, "t_s": t}
        for rid, times in token_times.items()
        for i, t in enumerate(times)
    ]
    telemetry = [
        {"t": t, "running": r, "waiting": 0.0, "kv_cache_usage": 0.0, "generation_tokens_total": 0.0,
         "prompt_tokens_total": 0.0, "preemptions_total": 0.0}
        for t, r in polls
    ]
    return (
        pa.Table.from_pylist(rows, schema=RECORD_SCHEMA).to_pandas(),
        pa.Table.from_pylist(tokens, schema=TOKEN_SCHEMA).to_pandas(),
        pa.Table.from_pylist(telemetry, schema=TELEMETRY_SCHEMA).to_pandas(),
    )


# B = 2, all sent at t=100. r0 and r1 run together; r2 takes r1's row; r3 fails.
CONTINUOUS_TOKENS = {0: [101.0, 101.5, 102.0], 1: [101.0, 102.0], 2: [103.0, 103.5, 104.0]}
CONTINUOUS_ROWS = [
    record(0, planned=3, tokens_at=CONTINUOUS_TOKENS[0], lateness=0.0),
    record(1, planned=2, tokens_at=CONTINUOUS_TOKENS[1], lateness=0.1),
    record(2, planned=3, tokens_at=CONTINUOUS_TOKENS[2], lateness=0.2),
    record(3, planned=4, tokens_at=[], end=100.5, ok=False, error="boom", status=500, lateness=0.3),
]
# running: 0 until 100.5, 2 until 102, then 1 until 104, 0 after.
CONTINUOUS_POLLS = [(99.0, 0.0), (100.5, 2.0), (102.0, 1.0), (103.0, 1.0), (104.0, 0.0), (105.0, 0.0)]


@pytest.fixture
def continuous():
    records, tokens, telemetry = tables(CONTINUOUS_ROWS, CONTINUOUS_TOKENS, CONTINUOUS_POLLS)
    return compute_run_metrics(records, tokens, telemetry, batch_size=2, slo=SloMs(ttft_ms=1500, e2e_ms=3000))


def test_throughput_counts_useful_and_prompt_tokens_over_the_makespan(continuous):
    # Window: first send 100 to last ok end 104; the failed request adds no tokens.
    assert continuous.makespan_s == 4.0
    assert (continuous.useful_tokens, continuous.generated_tokens, continuous.prompt_tokens) == (8, 8, 30)
    assert continuous.output_tok_s == 2.0
    assert continuous.generated_tok_s == 2.0
    assert continuous.total_tok_s == (30 + 8) / 4
    assert continuous.req_s == 3 / 4


def test_latency_distributions(continuous):
    assert continuous.ttft_s == Percentiles(count=3, mean=5 / 3, p50=1.0, p90=2.6, p99=pytest.approx(2.96), max=3.0)
    assert continuous.e2e_s.mean == pytest.approx(8 / 3)
    assert (continuous.e2e_s.p50, continuous.e2e_s.max) == (2.0, 4.0)
    # TPOT: r0 (102-101)/2, r1 (102-101)/1, r2 (104-103)/2.
    assert continuous.tpot_s.mean == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert continuous.tpot_s.p50 == 0.5
    # ITL: r0 0.5 0.5, r1 1.0, r2 0.5 0.5.
    assert continuous.itl_s.count == 5
    assert continuous.itl_s.mean == pytest.approx(0.6)
    assert continuous.itl_s.max == 1.0


def test_goodput_counts_requests_meeting_every_set_slo(continuous):
    # TTFT <= 1.5 s and E2E <= 3 s: r0 and r1 meet both, r2's TTFT is 3 s; r3 failed.
    assert continuous.slo_met == 2
    assert continuous.slo_met_fraction == 2 / 4
    assert continuous.goodput_req_s == 2 / 4


def test_no_slo_means_every_ok_request_counts():
    records, tokens, telemetry = tables(CONTINUOUS_ROWS, CONTINUOUS_TOKENS, CONTINUOUS_POLLS)
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=2)
    assert (metrics.slo_met, metrics.goodput_req_s) == (3, 3 / 4)


def test_tpot_slo_passes_single_token_requests():
    rows = [record(0, planned=1, tokens_at=[101.0]), record(1, planned=2, tokens_at=[101.0, 101.2])]
    records, tokens, telemetry = tables(rows, {0: [101.0], 1: [101.0, 101.2]})
    # r1's TPOT is 200 ms, over the 100 ms target; r0 has no TPOT.
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=2, slo=SloMs(tpot_ms=100))
    assert metrics.slo_met == 1


def test_occupancy_is_time_weighted_over_the_window(continuous):
    # Over [100, 104]: 0 for 0.5 s, 2 for 1.5 s, 1 for 2 s -> 5 sequence-seconds / 4 s / B=2.
    assert continuous.mean_occupancy == pytest.approx(0.625)


def test_occupancy_covers_only_the_polled_part_of_the_window():
    polls = pd.DataFrame({"t": [102.0, 103.0], "running": [2.0, 1.0]})
    # No poll before 102: the mean covers [102, 104] only: (2 + 1) / 2 s / B=2.
    assert mean_occupancy(polls, 2, 100.0, 104.0) == pytest.approx(0.75)
    assert math.isnan(mean_occupancy(polls.iloc[:0], 2, 100.0, 104.0))


def test_occupancy_series_starts_with_the_value_held_at_the_window_start():
    _, _, telemetry = tables([], {}, CONTINUOUS_POLLS)
    series = occupancy_series(telemetry, 2, 100.0, 104.0)
    assert series["t_s"].tolist() == [0.0, 0.5, 2.0, 3.0, 4.0]
    assert series["occupancy"].tolist() == [0.0, 1.0, 0.5, 0.5, 0.0]
    # A window ending between polls closes with the value held at its end.
    series = occupancy_series(telemetry, 2, 100.0, 103.5)
    assert series["t_s"].tolist() == [0.0, 0.5, 2.0, 3.0, 3.5]
    assert series["occupancy"].tolist() == [0.0, 1.0, 0.5, 0.5, 0.5]


def test_useful_slot_time_fraction(continuous):
    # First-to-last useful token: 1 s each for r0, r1, r2, over B x makespan = 2 x 4.
    assert continuous.useful_slot_time_fraction == pytest.approx(3 / 8)


def test_lateness_errors_and_counts(continuous):
    assert continuous.lateness_s.mean == pytest.approx(0.15)
    assert continuous.lateness_s.max == pytest.approx(0.3)
    assert continuous.lateness_s.p99 == pytest.approx(0.297)
    assert (continuous.requests, continuous.ok, continuous.failed) == (4, 3, 1)
    assert continuous.errors == {"boom": 1}


def test_closed_loop_lateness_is_nan_not_an_error():
    rows = [record(0, planned=2, tokens_at=[101.0, 102.0], lateness=math.nan)]
    records, tokens, telemetry = tables(rows, {0: [101.0, 102.0]})
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=1)
    assert metrics.lateness_s.count == 0
    assert math.isnan(metrics.lateness_s.p99)


# Naive, B = 2: one wave padded to 4 tokens; r0 wanted 2 of them.
NAIVE_TOKENS = {0: [101.0, 102.0, 103.0, 104.0], 1: [101.0, 102.0, 103.0, 104.0]}
NAIVE_ROWS = [
    record(0, planned=2, requested=4, tokens_at=NAIVE_TOKENS[0]),
    record(1, planned=4, requested=4, tokens_at=NAIVE_TOKENS[1]),
]


def test_naive_padding_is_generated_but_not_useful():
    records, tokens, telemetry = tables(NAIVE_ROWS, NAIVE_TOKENS)
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=2)
    assert (metrics.useful_tokens, metrics.generated_tokens) == (6, 8)
    assert metrics.output_tok_s == 6 / 4
    assert metrics.generated_tok_s == 8 / 4
    assert metrics.total_tok_s == (20 + 6) / 4
    # r0 is done for its user at its 2nd token (102), though its response ends at 104.
    assert (metrics.useful_e2e_s.p50, metrics.useful_e2e_s.max) == (3.0, 4.0)
    assert metrics.useful_e2e_s.mean == 3.0
    assert metrics.e2e_s.mean == 4.0
    # Padding tokens are not ITL samples: r0 contributes 1 gap, r1 three.
    assert metrics.itl_s.count == 4
    assert metrics.tpot_s.mean == 1.0
    # Useful slot time (102-101) + (104-101) over 2 x 4 slot-seconds.
    assert metrics.useful_slot_time_fraction == 0.5
    assert math.isnan(metrics.mean_occupancy)


def test_request_table_flags_padding_and_falls_back_to_token_counts():
    rows = [record(0, planned=2, requested=4, tokens_at=NAIVE_TOKENS[0], completion=-1)]
    records, tokens, _ = tables(rows, {0: NAIVE_TOKENS[0]})
    table = request_table(records, tokens)
    # Usage unknown (-1): the four token rows count as generated.
    assert table.loc[0, "generated_tokens"] == 4
    assert table.loc[0, "useful_tokens"] == 2
    assert bool(table.loc[0, "padded"])


def test_length_mismatch_and_http_errors_are_counted():
    rows = [
        record(0, planned=3, tokens_at=[101.0, 102.0], mismatch=True),
        record(1, planned=3, tokens_at=[], end=100.2, ok=False, status=503),
        record(2, planned=3, tokens_at=[], end=100.2, ok=False, status=0, error="timeout"),
    ]
    records, tokens, telemetry = tables(rows, {0: [101.0, 102.0]})
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=1)
    assert metrics.length_mismatches == 1
    assert metrics.errors == {"HTTP 503": 1, "timeout": 1}
    # Two tokens generated of three planned: both are useful.
    assert metrics.useful_tokens == 2


def test_no_ok_request_gives_nan_rates():
    rows = [record(0, planned=3, tokens_at=[], end=100.2, ok=False, status=500)]
    records, tokens, telemetry = tables(rows, {})
    metrics = compute_run_metrics(records, tokens, telemetry, batch_size=1)
    assert metrics.ok == 0
    assert math.isnan(metrics.total_tok_s) and math.isnan(metrics.makespan_s)
    assert metrics.slo_met_fraction == 0.0


def test_flat_dict_flattens_distributions_and_errors(continuous):
    flat = continuous.to_flat_dict()
    assert flat["total_tok_s"] == 9.5
    assert flat["ttft_s.p50"] == 1.0
    assert flat["errors.boom"] == 1
    assert not any(isinstance(v, (dict, Percentiles)) for v in flat.values())


def test_distribution_of_empty_and_nan():
    empty = Percentiles.of([math.nan])
    assert empty.count == 0 and math.isnan(empty.mean)
    assert Percentiles.of(np.array([1.0, 2.0, 3.0, 4.0, 5.0])).p90 == pytest.approx(4.6)


def test_a_poll_stands_for_at_most_its_hold_time():
    # Polls at 100 (2 running) and 103 (0), window [100, 104], B=2, hold 1 s: 2 running
    # over [100, 101], unknown over (101, 103), 0 over [103, 104] -> 2 seq-s / 2 s / 2.
    polls = pd.DataFrame({"t": [100.0, 103.0], "running": [2.0, 0.0]})
    assert mean_occupancy(polls, 2, 100.0, 104.0, max_hold_s=1.0) == pytest.approx(0.5)
    assert mean_occupancy(polls, 2, 100.0, 104.0) == pytest.approx(0.75)
    series = occupancy_series(polls, 2, 100.0, 104.0, max_hold_s=1.0)
    assert series["t_s"].tolist() == [0.0, 1.0, 3.0, 4.0]
    assert series["occupancy"].tolist()[0] == 1.0 and math.isnan(series["occupancy"].tolist()[1])
