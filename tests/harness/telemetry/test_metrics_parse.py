"""Picking vLLM's gauges and counters out of a Prometheus exposition."""

from __future__ import annotations

from harness.rundir.records import TELEMETRY_SCHEMA
from harness.telemetry.metrics import TELEMETRY_COLUMNS, parse_metrics, sum_series

EXPOSITION = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="1",model_name="tiny"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 7.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 99.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 1234.0
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="tiny"} 1.7e9
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 512.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 4.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="tiny"} 2.0
"""


def test_values_are_summed_over_engines_and_unrelated_families_ignored():
    sample = parse_metrics(EXPOSITION, t=5.0)
    assert sample.t == 5.0
    assert sample.running == 5.0
    assert sample.waiting == 7.0
    assert sample.kv_cache_usage == 0.25
    assert sample.generation_tokens_total == 1234.0
    assert sample.prompt_tokens_total == 512.0
    assert sample.preemptions_total == 4.0


def test_telemetry_schema_matches_the_sampler():
    assert tuple(TELEMETRY_SCHEMA.names) == TELEMETRY_COLUMNS


def test_sum_series_adds_histogram_sums_over_engines_and_reads_absent_ones_as_zero():
    text = """\
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 1.5
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 3.0
vllm:request_queue_time_seconds_sum{engine="1",model_name="tiny"} 0.25
vllm:request_queue_time_seconds_count{engine="1",model_name="tiny"} 1.0
"""
    series = {
        "vllm:request_queue_time_seconds_sum": "queued_s",
        "vllm:request_queue_time_seconds_count": "queued",
        "vllm:inter_token_latency_seconds_sum": "itl_s",
    }
    assert sum_series(text, series) == {"queued_s": 1.75, "queued": 4.0, "itl_s": 0.0}
