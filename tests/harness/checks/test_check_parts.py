"""The gpu-check's parts that need no server: counters against steps, the GPU found, the rows' judgements."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.analysis.stats import Estimate
from harness.checks.counters import MAX_DIFFERENCE, SERIES, CounterComparison, EngineCounters, step_log_totals, worst
from harness.checks.device import H200, FoundGpu, check_fits, parse_query, predicted_setup
from harness.checks.modes import judge
from harness.checks.recorder import MAX_COST, order
from harness.checks.reproduction import PREDICTION_TOLERANCE, Deviation, Spread, deviations
from harness.checks.rows import (
    counter_rows,
    mode_row,
    ordering_row,
    prediction_rows,
    recorder_row,
    skipped_recorder_row,
)
from harness.checks.sizes import CPU, GPU
from harness.telemetry.metrics import sum_series
from harness.workload import load_specs

EXPOSITION = """# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_sum{engine="0",model_name="tiny"} 1234.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="tiny"} 17.0
vllm:iteration_tokens_total_count{engine="0",model_name="tiny"} 17.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 200.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 64.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 2.0
"""


def test_the_counters_are_read_from_vllms_exposition():
    assert sum_series(EXPOSITION, SERIES) == {
        "steps": 17.0, "generated_tokens": 200.0, "prompt_tokens": 64.0, "running": 2.0, "waiting": 0.0}


def test_only_steps_that_sampled_a_token_count_as_vllms_iterations():
    steps = pd.DataFrame({"generated_tokens": [0, 4, 4, 3], "prefill_tokens": [2048, 64, 0, 0]})
    assert step_log_totals(steps) == EngineCounters(steps=3, generated_tokens=11, prompt_tokens=2112)


def test_the_worst_run_is_the_one_furthest_from_its_counter():
    exact = CounterComparison("a", EngineCounters(10, 100, 50), EngineCounters(10, 100, 50))
    short = 1000 * (1 - 2 * MAX_DIFFERENCE)
    off = CounterComparison("b", EngineCounters(1000, 100, 50), EngineCounters(short, 100, 50))
    assert worst([exact, off], "steps") is off and worst([exact, off], "prompt_tokens") is exact
    rows = {row.name: row for row in counter_rows([exact, off])}
    assert rows["step log vs vLLM: steps"].status == "fail"
    assert rows["step log vs vLLM: generated tokens"].status == "pass"
    assert EngineCounters(5, 6, 7) - EngineCounters(1, 2, 3) == EngineCounters(4, 4, 4)
    assert CounterComparison("c", EngineCounters(0, 0, 0), EngineCounters(1, 0, 0)).difference("steps") == float("inf")


@pytest.mark.parametrize(("listed", "spec"), [
    ("NVIDIA H100 80GB HBM3, 81559", "H100 SXM 80GB"),
    ("NVIDIA H200, 143771", "H200 141GB"),
    ("NVIDIA A100-SXM4-80GB, 81920", "A100 80GB"),
    ("NVIDIA A100-SXM4-40GB, 40960", "A100 40GB"),
    ("NVIDIA L4, 23034", None),
])
def test_the_gpu_is_known_by_its_name_and_memory(listed, spec):
    found = parse_query(listed + "\n")
    assert found is not None and found.name == listed.split(",")[0]
    assert (found.spec.name if found.spec else None) == spec
    assert parse_query("") is None


def test_two_8b_servers_fit_an_80_gb_card_and_not_a_40_gb_one():
    check_fits("llama-3.1-8b", FoundGpu("NVIDIA H100 80GB HBM3", 85.5e9), GPU.gpu_memory_share or 0)
    with pytest.raises(ValueError, match="do not fit"):
        check_fits("llama-3.1-8b", FoundGpu("NVIDIA A100-SXM4-40GB", 42.9e9), GPU.gpu_memory_share or 0)


def test_the_prediction_uses_this_cards_constants_and_its_share_of_memory():
    setup = predicted_setup("llama-3.1-8b", H200, 0.42)
    assert setup is not None and setup.gpu == H200 and setup.max_num_batched_tokens.value == 8192
    assert setup.kv_cache_bytes.value == pytest.approx(141e9 * 0.42 - 16.06e9 - 3e9, rel=0.01)
    assert predicted_setup("tiny", H200, 0.42) is None


def test_continuous_static_naive_in_order_and_the_margin_is_the_smaller_step():
    spread = Spread("w", {"continuous": 300.0, "static": 200.0, "naive": 190.0})
    row = ordering_row(spread)
    assert spread.ordered and row.status == "pass" and row.measured == pytest.approx(200 / 190)
    flipped = ordering_row(Spread("w", {"continuous": 300.0, "static": 180.0, "naive": 190.0}))
    assert flipped.status == "fail" and flipped.measured == pytest.approx(180 / 190)


def test_without_a_gpu_the_ordering_is_reported_not_judged():
    # The CI's run at B = 16 on two cores: continuous's fuller steps cost 1.7x static's.
    row = ordering_row(Spread("seed", {"continuous": 1079.0, "static": 1183.0, "naive": 594.0}), decides=False)
    assert row.status == "skip" and row.measured == pytest.approx(1079 / 1183)
    assert "continuous/static 0.91x" in row.explanation and "not judged without a GPU" in row.explanation


def test_the_recorder_fails_only_when_its_whole_interval_lies_above_the_limit():
    noisy = recorder_row(Estimate(0.95, 0.90, 1.02, 3, "x"), 3)
    assert noisy.status == "pass" and noisy.interval == pytest.approx((-2.0, 10.0))
    costly = recorder_row(Estimate(0.95, 0.94, 1 - MAX_COST - 0.001, 3, "x"), 3)
    assert costly.status == "fail"
    assert order(0) == ("recorded", "plain") and order(1) == ("plain", "recorded")


def test_where_the_ab_cannot_resolve_the_limit_the_recorder_row_is_reported_not_judged():
    costly = recorder_row(Estimate(0.90, 0.85, 0.95, 3, "x"), 3, decides=False)
    assert costly.status == "skip" and costly.measured == pytest.approx(10.0)
    assert "not judged on the CPU" in costly.explanation
    skipped = skipped_recorder_row()
    assert skipped.status == "skip" and skipped.passed and skipped.measured is None and skipped.figure() == "-"
    assert "--recorder-ab" in skipped.explanation and "recorder-cost.md" in skipped.explanation


def test_measured_against_paper_within_the_tolerance_either_way():
    spec = load_specs(["anyscale-cap512"])[0].model_copy(update={"num_requests": 64})
    setup = predicted_setup("llama-3.1-8b", H200, 0.42)
    assert setup is not None
    predicted = deviations(setup, [spec], [Spread(spec.name, {"continuous": 1.0, "static": 1.0, "naive": 1.0})], 16)
    assert [d.system for d in predicted] == ["continuous", "static"] and all(d.predicted > 0 for d in predicted)
    near = Deviation("w", "continuous", 1.2, 1.0)
    far = Deviation("w", "static", 1.0 * (1 - PREDICTION_TOLERANCE) - 0.01, 1.0)
    rows = prediction_rows([near, far, Deviation("v", "static", 1.0, 1.0)], "H200")
    assert [(row.name, row.status) for row in rows] == [("continuous vs paper (H200)", "pass"),
                                                         ("static vs paper (H200)", "fail")]


def test_a_mode_row_names_the_first_wrong_attempt():
    assert mode_row(judge("static", [])).status == "fail"


def test_sizes_keep_ten_attempts_per_mode_on_either_device():
    assert GPU.mode_attempts == CPU.mode_attempts == 10


def test_joules_per_token_are_shown_only_where_the_runs_sampled_a_gpu():
    assert Spread("w", {"continuous": 3.0, "static": 2.0, "naive": 1.0}).energy() == ""
    sampled = Spread("w", {"continuous": 3.0, "static": 2.0, "naive": 1.0}, {"continuous": 0.25, "static": 0.5})
    assert sampled.energy() == "w: continuous 0.250, static 0.500 J per generated token"
