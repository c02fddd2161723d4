"""The rate sweep's pure parts: its grid, its points and what is read off a curve."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from harness.analysis.engine import queue_waits
from harness.rate_sweep.curve import SloSeconds, held_rate, knee_rate
from harness.rate_sweep.grid import (
    RUN_OVERHEAD_S,
    burst_spec,
    expected_run_s,
    measure_for_budget,
    offered_rate,
    rate_grid,
    rate_spec,
    saturation_rate,
)
from harness.rate_sweep.point import RatePoint, measure_point
from harness.rate_sweep.report import write_rate_report
from harness.rate_sweep.result import RateSweepResult, SweepSettings, cdf_rate, queue_wait_ratio, system_result
from harness.rate_sweep.schedule import RateSchedule
from harness.workload import build_plan, load_spec


def _point(rate: float, e2e: float, ttft: float = 0.1, e2e_p99: float | None = None, keeps_up: bool = True,
           queue: float = 0.0, system: str = "continuous") -> RatePoint:
    return RatePoint(system, rate, rate, rate, 0.0, 100, 0, ttft, ttft * 2, e2e, e2e * 0.9, e2e * 1.1,
                     e2e_p99 if e2e_p99 is not None else 2 * e2e, e2e / 100, queue, queue * 3,
                     wait_growth_s=0.0 if keeps_up else 1.2, wait_growth_low_s=0.0 if keeps_up else 1.0)


def test_saturation_rate_counts_to_the_90th_percentile_finish():
    # 10 requests sent at t=100, finishing 1 s apart: the 9th finish at t=109 gives 9 / 9 s.
    records = pd.DataFrame({"ok": [True] * 10, "sent_s": [100.0] * 10, "end_s": 100.0 + np.arange(1, 11)})
    assert saturation_rate(records) == pytest.approx(1.0)
    assert math.isnan(saturation_rate(records.assign(ok=False)))


def test_rate_grid_is_fractions_of_saturation_ascending_and_distinct():
    assert rate_grid(8.0, (1.0, 0.5, 0.5, 1.1)) == [4.0, 8.0, 8.8]
    with pytest.raises(ValueError, match="saturation"):
        rate_grid(math.nan)


def test_rate_spec_and_burst_spec_replace_only_the_arrivals_and_the_count():
    spec = load_spec("cpu-anyscale-latency")
    at = rate_spec(spec, 3.5, warmup_s=2, measure_s=10)
    assert (at.name, at.arrival.kind, at.duration_s, at.num_requests) == (
        "cpu-anyscale-latency-at-3.50rps", "poisson", 12, None)
    assert at.arrival.rate == 3.5 and at.output_tokens == spec.output_tokens
    plan = build_plan(at)
    assert max(request.arrival_s for request in plan.requests) < 12
    burst = burst_spec(spec, 40)
    assert (burst.arrival.kind, burst.num_requests, len(build_plan(burst).requests)) == ("burst", 40, 40)


def test_a_trace_at_a_rate_keeps_its_arrivals_shape_and_its_burst_its_lengths():
    spec = load_spec("cpu-trace-chat")
    trace = build_plan(spec)
    at = rate_spec(spec, 3.0, warmup_s=4, measure_s=20)
    assert (at.name, at.arrival.kind, at.num_requests, offered_rate(at)) == ("cpu-trace-chat-at-3.00rps", "trace",
                                                                            72, 3.0)
    plan = build_plan(at)
    arrivals = np.array([request.arrival_s for request in plan.requests])
    native = np.array([request.arrival_s for request in trace.requests[:72]])
    # The first 72 rows, their gaps in proportion, 3 a second on average.
    assert [request.trace_row for request in plan.requests] == list(range(72))
    np.testing.assert_allclose(arrivals, native * arrivals[-1] / native[-1], atol=2e-6)  # plans keep microseconds
    assert 71 / arrivals[-1] == pytest.approx(3.0)
    burst = burst_spec(spec, 40)
    burst_plan = build_plan(burst)
    assert (burst_plan.arrival, {request.arrival_s for request in burst_plan.requests}) == ("burst", {0.0})
    assert [r.output_tokens for r in burst_plan.requests] == [r.output_tokens for r in trace.requests[:40]]
    assert math.isnan(offered_rate(burst))


def _records(arrivals: np.ndarray, waits: np.ndarray, service_s: float = 1.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's records and steps: request i sent at 1000 + arrivals[i], admitted waits[i] later."""
    sent = 1000.0 + arrivals
    n = len(arrivals)
    records = pd.DataFrame({
        "request_id": np.arange(n), "scheduled_s": sent, "sent_s": sent, "lateness_s": np.zeros(n),
        "first_token_s": sent + waits + 0.05, "end_s": sent + waits + service_s, "ok": True,
        "completion_tokens": 10, "planned_output_tokens": 10, "requested_output_tokens": 10, "prompt_tokens": 5,
        "planned_prompt_tokens": 5,
    })
    steps = pd.DataFrame({"t_s": sent + waits, "end_s": sent + waits + 0.05,
                          "admitted": [[i] for i in range(n)], "finished": [[] for _ in range(n)]})
    return records, steps


def _tokens() -> pd.DataFrame:
    return pd.DataFrame({"request_id": pd.Series(dtype=np.int64), "token_index": pd.Series(dtype=np.int64),
                         "t_s": pd.Series(dtype=float)})


def test_queue_wait_is_admission_step_start_minus_send():
    records, steps = _records(np.array([0.0, 1.0, 2.0]), np.array([0.1, 0.5, 2.0]))
    assert queue_waits(records, steps).to_dict() == pytest.approx({0: 0.1, 1: 0.5, 2: 2.0})


def test_a_queue_that_grows_for_the_whole_run_did_not_keep_up():
    arrivals = np.linspace(0, 24, 200)
    tokens = _tokens()
    stable_waits = np.random.default_rng(0).exponential(0.2, 200)
    records, steps = _records(arrivals, stable_waits)
    stable = measure_point("continuous", 8.0, records, tokens, steps, warmup_s=4)
    assert stable.keeps_up and stable.measured == sum(arrivals >= 4)
    records, steps = _records(arrivals, stable_waits + 0.3 * arrivals)  # 6 s more wait by the end
    growing = measure_point("static", 8.0, records, tokens, steps, warmup_s=4)
    assert not growing.keeps_up and growing.wait_growth_s == pytest.approx(6.0, rel=0.15)
    assert growing.queue_wait_p50_s > 5 * stable.queue_wait_p50_s


def test_a_queue_built_in_the_warm_up_that_still_grows_did_not_keep_up():
    # A 4 s queue from the warm-up, grown 1.7 s over 20 s: the queue's level does not excuse its growth.
    arrivals = np.sort(np.random.default_rng(1).uniform(0, 24, 150))
    waits = 4.0 + 0.085 * (arrivals - 4) + np.random.default_rng(2).uniform(-0.7, 0.7, 150)
    records, steps = _records(arrivals, waits)
    point = measure_point("static", 6.55, records, _tokens(), steps, warmup_s=4)
    assert not point.keeps_up and point.wait_growth_low_s > 0.5


def test_a_static_queue_s_sawtooth_with_a_drift_under_the_limit_kept_up():
    # Each request waits for the next batch, every 2.5 s: waits fall 2.5 -> 0 between batches, plus a drift of 0.4 s
    # over the window. The sawtooth throws the slope's estimate (0.96 s with these arrivals, over the limit and
    # over the old rule's); its interval is wide, and its low end under the limit.
    arrivals = np.sort(np.random.default_rng(3).uniform(0, 24, 120))
    waits = (2.5 - arrivals % 2.5) + 0.02 * arrivals
    records, steps = _records(arrivals, waits)
    point = measure_point("static", 5.0, records, _tokens(), steps, warmup_s=4)
    assert point.wait_growth_s > 0.75 and point.keeps_up


def test_knee_is_where_median_e2e_per_token_doubles_interpolated():
    points = [_point(1, 1.0), _point(2, 1.2), _point(3, 1.6), _point(4, 2.4)]
    assert knee_rate(points) == pytest.approx(3.5)
    assert knee_rate(points[:3]) is None
    # A queue that grew (to twice its limit) is past the knee, whatever the median says.
    assert knee_rate([_point(1, 1.0), _point(2, 1.2, keeps_up=False)]) == pytest.approx(4 / 3)
    assert knee_rate([_point(1, 1.0, keeps_up=False), _point(2, 1.2)]) == 1


def test_knee_is_read_at_the_fit_s_speed_so_one_slow_run_does_not_make_it():
    # The run at 2 req/s measured 2.2x the lowest rate's latency per token, but its steps ran 1.5x slower than
    # the fit on the other runs: at the fit's speed it is 1.47x, and the knee is where the load doubles it.
    points = [_point(1, 1.0), replace(_point(2, 2.2), run_speed=1.5), _point(3, 1.6), _point(4, 2.4)]
    assert knee_rate(points) == pytest.approx(3.5)
    assert knee_rate([replace(point, run_speed=math.nan) for point in points]) == pytest.approx(1 + 1 / 1.2)
    # A fast lowest rate sets a low limit unless read at the fit's speed.
    fast_first = [replace(_point(1, 0.8), run_speed=0.8), _point(2, 1.2), _point(3, 1.6), _point(4, 2.4)]
    assert knee_rate(fast_first) == pytest.approx(3.5)


def test_held_rate_interpolates_the_worst_target_and_stops_at_the_first_failure():
    slo = SloSeconds(ttft_p50_s=1.0, e2e_p99_s=10.0)
    points = [_point(1, 1.0, e2e_p99=4), _point(2, 1.0, e2e_p99=8), _point(3, 1.0, e2e_p99=12),
              _point(4, 1.0, e2e_p99=6)]
    held = held_rate(points, slo)
    assert (held.rate, held.bound) == (pytest.approx(2.5), "interpolated")
    assert held_rate(points[:2], slo).bound == "at least"
    low = held_rate([_point(1, 1.0, ttft=2.0)], slo)
    assert math.isnan(low.rate) and low.bound == "below the grid"


def test_result_ratios_cdf_rate_and_queue_wait_ratio():
    slo = SloSeconds(1.0, 10.0)
    continuous = system_result("continuous", 8.0, [_point(r, 1.0 + r / 8, e2e_p99=r + 1, queue=0.1)
                                                   for r in (2, 4, 6, 8)], slo)
    static = system_result("static", 5.0, [_point(r, 1.0 + r / 2, e2e_p99=2 * r, system="static",
                                                  queue=1.0, keeps_up=r < 6) for r in (2, 4, 6, 8)], slo)
    settings = SweepSettings("w", 16, slo, 4, 20, 1.0, math.nan)
    result = RateSweepResult(settings, (continuous, static))
    # Static's p99 E2E target ratio 0.8 at 4, its queue's growth ratio 2 at 6: held to 4 + 0.2 / 1.2 x 2.
    assert static.held.rate == pytest.approx(13 / 3) and continuous.held.bound == "at least"
    assert result.held_ratio("continuous", "static") == pytest.approx(8 / (13 / 3))
    assert static.knee_rps == pytest.approx(4.4)  # median E2E 3 s of a 4 s limit at 4, growth ratio 2 at 6
    assert cdf_rate([continuous, static]) == 4  # the highest rate below every knee
    # A rate only static ran (a refinement) has no continuous CDF to draw beside it.
    refined = system_result("static", 5.0, [*static.points, _point(4.2, 3.0, system="static")], slo)
    assert cdf_rate([continuous, refined]) == 4
    assert queue_wait_ratio(static, continuous) == {6: pytest.approx(10), 8: pytest.approx(10)}


def test_report_of_a_sweep_in_progress_has_every_file_and_no_nan(tmp_path):
    slo = SloSeconds(1.0, 10.0)
    continuous = system_result("continuous", 8.0, [_point(2, 1.0), _point(4, 1.5, keeps_up=False)], slo)
    static = system_result("static", 5.0, [], slo)  # its first run is still under way
    result = RateSweepResult(SweepSettings("w", 16, slo, 4, 5, 1.0, 12.5), (continuous, static), 2,
                             {"continuous": np.array([0.5, 1.0, 2.0])})
    markdown, page, summary = write_rate_report(result, tmp_path, "PRELIMINARY: 2 of 6 runs")
    text = markdown.read_text()
    assert "PRELIMINARY" in text and "a check that the sweep works, not a measurement" in text
    assert text.index("held under the SLO") < text.index("Every run")
    # The answer, then what was measured and how far to trust it, then the details.
    assert text.index("held under the SLO") < text.index("- workload: w at B = 16, Poisson") < text.index(
        "- trust: 2 runs, 1 of them past where their queue kept up") < text.index("| system | saturation")
    data = json.loads(summary.read_text())
    assert data["systems"]["static"]["points"] == [] and data["held_ratio"]["continuous/static"] is None
    assert data["systems"]["continuous"]["knee_rps"] == pytest.approx(8 / 3) and page.stat().st_size > 10_000
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == ["latency-cdf.png", "latency-vs-rate.png"]


def test_a_sweep_on_an_untested_vllm_says_so_in_the_title_beside_the_headline_and_in_summary_json(tmp_path):
    slo = SloSeconds(1.0, 10.0)
    continuous = system_result("continuous", 8.0, [_point(2, 1.0), _point(4, 1.5)], slo)
    marking = "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)"
    result = RateSweepResult(SweepSettings("w", 16, slo, 4, 20, 1.0, 12.5), (continuous,), untested_vllm=(marking,))
    markdown, _, summary = write_rate_report(result, tmp_path)
    text = markdown.read_text()
    assert text.startswith("# UNTESTED VLLM. Rate sweep: w")
    assert text.index(f"**{marking}: run with --allow-untested-vllm.") < text.index(
        "The highest offered rate each held")
    assert json.loads(summary.read_text())["untested_vllm"] == [marking]


def test_a_run_past_its_saturation_is_priced_with_its_backlog_and_a_budget_solves_for_its_length():
    assert expected_run_s(5.0, 10.0, 24.0) == pytest.approx(24.0 + RUN_OVERHEAD_S)
    assert expected_run_s(15.0, 10.0, 24.0) == pytest.approx(36.0 + RUN_OVERHEAD_S)  # half again to drain
    runs = [(5.0, 10.0), (15.0, 10.0), (3.0, 2.0)]
    measure_s = measure_for_budget(300.0, runs, warmup_s=4.0)
    assert sum(expected_run_s(rate, saturation, 4.0 + measure_s) for rate, saturation in runs) == pytest.approx(300.0)
    assert measure_for_budget(10.0, runs, warmup_s=4.0) < 0  # not even the warm-ups fit


RATE_FOLD_PROBE = ("{innerHeight: window.innerHeight,"
                   " headline: document.getElementById('rate-headline').getBoundingClientRect().bottom,"
                   " images: document.images.length,"
                   " loaded: [...document.images].filter(i => i.complete && i.naturalWidth > 0).length}")


@pytest.mark.browser
def test_the_rate_report_opens_with_its_headline_above_the_fold_and_every_plot_loaded(tmp_path, probe_in_chromium):
    slo = SloSeconds(2.0, 10.0)
    curves = {name: [_point(r, (1 + r / 10) * scale, e2e_p99=r * scale, queue=0.01 * scale, system=name,
                            keeps_up=r < limit) for r in (3, 6, 9, 12)]
              for name, scale, limit in (("continuous", 0.3, 13), ("static", 1.2, 8))}
    systems = tuple(system_result(name, 10.0, points, slo) for name, points in curves.items())
    result = RateSweepResult(SweepSettings("cpu-anyscale-latency", 16, slo, 4, 20, 1.0, 8.4), systems, 3,
                             {"continuous": np.array([0.2, 0.3, 0.9]), "static": np.array([1.0, 1.5, 3.0])})
    _, page, _ = write_rate_report(result, tmp_path)
    seen = probe_in_chromium(page, RATE_FOLD_PROBE)
    assert seen["images"] == 2 and seen["loaded"] == 2, seen
    assert seen["headline"] < seen["innerHeight"], seen


def _made(schedule: RateSchedule, outcomes: dict[tuple[str, float], RatePoint]) -> list[list[tuple[str, float]]]:
    """Every group the schedule asks for, each run's point taken from `outcomes`."""
    groups, made = [], []
    while group := schedule.next_runs():
        groups.append(group)
        for run in group:
            made.append(outcomes[run])
            schedule.record(made)
    return groups


def test_a_system_leaves_the_grid_after_falling_behind_twice_and_the_others_go_on():
    outcomes = {("continuous", r): _point(r, 1.0) for r in (1, 2, 3, 4)}
    outcomes |= {("static", r): _point(r, 1.0, system="static", keeps_up=r < 2) for r in (1, 2, 3, 4)}
    schedule = RateSchedule([1, 2, 3, 4], ["continuous", "static"], SloSeconds(10.0, 100.0), {"static": 1.5},
                            extra_rates=0, refine_runs=0)
    # Static is expected to fall behind at the second grid rate above its burst's 1.5 req/s; continuous's is unknown.
    assert schedule.left() == [("continuous", 1), ("static", 1), ("continuous", 2), ("static", 2),
                               ("continuous", 3), ("static", 3), ("continuous", 4)]
    assert _made(schedule, outcomes) == [[("continuous", 1), ("static", 1)], [("continuous", 2), ("static", 2)],
                                         [("continuous", 3), ("static", 3)], [("continuous", 4)]]
    assert not schedule.in_sweep("static") and schedule.in_sweep("continuous")


def test_the_grid_grows_past_its_top_until_the_system_crosses_or_the_extra_rates_run_out():
    holds = {("continuous", r): _point(r, 1.0) for r in (1, 2, 2.4, 2.88)}
    schedule = RateSchedule([1, 2], ["continuous"], SloSeconds(10.0, 100.0), extra_rates=2, refine_runs=0)
    assert [group[0][1] for group in _made(schedule, holds)] == [1, 2, 2.4, 2.88]
    # Past its knee and its SLO at 2.4 (its queue grew): no more rates.
    behind = holds | {("continuous", 2.4): _point(2.4, 1.0, keeps_up=False)}
    schedule = RateSchedule([1, 2], ["continuous"], SloSeconds(10.0, 100.0), extra_rates=2, refine_runs=0)
    assert [group[0][1] for group in _made(schedule, behind)] == [1, 2, 2.4]


def test_refinement_halves_the_held_bracket_then_the_knee_s_while_wider_than_a_tenth():
    slo = SloSeconds(10.0, 100.0)
    # Held between 2 and 4 (its queue grew at 4), halved at 3, then between 3 and 4, halved at 3.5.
    outcomes = {("static", r): _point(r, 1.0 + r / 10, system="static", keeps_up=r < 4) for r in (1, 2, 3, 3.5, 4)}
    schedule = RateSchedule([1, 2, 4], ["static"], slo, extra_rates=0, refine_runs=2)
    assert [group[0][1] for group in _made(schedule, outcomes)] == [1, 2, 4, 3, 3.5]
    assert schedule.left() == []
    # Held between 2 and 2.1 (5% apart: not split); the knee between 1 and 2 (the median doubled at 2): halved.
    outcomes = {("static", 1): _point(1, 1.0, system="static"), ("static", 2): _point(2, 2.4, system="static"),
                ("static", 2.1): _point(2.1, 2.5, system="static", keeps_up=False),
                ("static", 1.5): _point(1.5, 1.5, system="static"),
                ("static", 1.75): _point(1.75, 2.2, system="static")}
    schedule = RateSchedule([1, 2, 2.1], ["static"], slo, extra_rates=0, refine_runs=2)
    assert [group[0][1] for group in _made(schedule, outcomes)] == [1, 2, 2.1, 1.5, 1.75]


def test_a_sweep_of_an_endpoint_with_client_static_reads_waits_as_ttft_and_says_every_figure_is_the_client_s(
        tmp_path):
    slo = SloSeconds(1.0, 10.0)
    nan = math.nan
    continuous = system_result("continuous", 8.0, [_point(r, 1.0 + r / 8, ttft=0.2, e2e_p99=r + 1, queue=nan)
                                                   for r in (2, 4, 6)], slo)
    client_static = system_result("client-static", 5.0, [
        _point(r, 1.0 + r / 2, ttft=0.2 * r, e2e_p99=2 * r, system="client-static", queue=nan, keeps_up=r < 6)
        for r in (2, 4, 6)], slo)
    settings = SweepSettings("w", 16, slo, 4, 20, 1.0, nan, engine_steps=False)
    result = RateSweepResult(settings, (continuous, client_static))
    assert result.static_system == "client-static"
    # No engine step log: the wait at the door is TTFT, 1.2 s against 0.2 s where client-static fell behind.
    assert queue_wait_ratio(client_static, continuous) == {6: pytest.approx(6)}
    markdown, _, summary = write_rate_report(result, tmp_path)
    text = markdown.read_text()
    ratio = result.held_ratio("continuous", "client-static")
    assert math.isfinite(ratio) and f"continuous holds {ratio:.2f}x the rate client-static holds" in text
    assert "static batching kept by the client (client-static" in text and "every figure is the client's" in text
    assert "No run is predicted" in text and "rate-predictions" not in (tmp_path / "report.html").read_text()
    assert "Where client-static's queue grew, its median queue wait over continuous's: 6.00x at 6" in text
    data = json.loads(summary.read_text())
    assert data["engine_steps"] is False and data["held_ratio"]["continuous/client-static"] == pytest.approx(ratio)
    assert data["held_ratio"]["continuous/static"] is None


def test_an_endpoint_given_alone_sweeps_client_static_in_static_s_place():
    from harness.jobs.rate_sweep import rate_systems
    from launchers import Endpoints

    assert rate_systems(Endpoints()) == ("continuous", "static")
    assert rate_systems(Endpoints(continuous="http://h:1")) == ("continuous", "client-static")
    assert rate_systems(Endpoints(continuous="http://h:1", static="http://h:2")) == ("continuous", "static")
