"""The health verdict of runs and cells, each limit broken on its own."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.analysis.engine import EngineMetrics
from harness.analysis.health import (
    Check,
    Health,
    cell_health,
    coalesced_share,
    run_health,
    schedule_check,
    telemetry_stats,
)
from harness.analysis.stats import median_ci

ENGINE = EngineMetrics(steps=500, makespan_s=60.0, generated_tokens=12_000, generated_tok_s=200.0,
                       mean_occupancy=0.9, median_step_s=0.1)


def healthy(**overrides):
    """run_health's keywords for a run that passes every check."""
    kwargs = dict(
        makespan_s=60.0,
        lateness_p99_s=0.002,
        burst=False,
        front_end_starved=0.001,
        loop_lag_p99_s=0.003,
        client_cpu_share=0.4,
        client_generated_tokens=12_000,
        client_generated_tok_s=201.0,  # +0.5% against the engine's 200
        engine=ENGINE,
        metrics_latency_p99_s=0.030,
        telemetry_max_gap_s=0.6,
        coalesced_share=0.01,
    )
    return {**kwargs, **overrides}


def names(health: Health) -> set[str]:
    return {check.name for check in health.checks}


def test_a_healthy_run_is_stable_with_no_reasons_or_notes():
    health = run_health(**healthy())
    assert health.stable
    assert health.reasons == []
    assert health.notes == []
    assert names(health) == {
        "makespan", "send lateness p99", "client loop lag p99", "client CPU share", "/metrics latency p99",
        "telemetry gap", "coalesced tokens", "front-end starvation", "client vs engine", "token count",
    }


@pytest.mark.parametrize(
    ("overrides", "check", "words"),
    [
        ({"makespan_s": 19.0}, "makespan", "19.0 s"),
        ({"lateness_p99_s": 0.035}, "send lateness p99", "35 ms"),
        ({"client_cpu_share": 0.95}, "client CPU share", "95% of a core"),
        ({"client_generated_tok_s": 206.0}, "client vs engine", "+3.0%"),
        ({"client_generated_tok_s": 194.0}, "client vs engine", "-3.0%"),
        ({"client_generated_tokens": 11_990}, "token count", "11990 tokens, engine generated 12000"),
        ({"front_end_starved": 0.076}, "front-end starvation", "for 7.6% of the run"),
    ],
)
def test_each_unstable_limit_breaks_the_verdict_with_a_reason(overrides, check, words):
    health = run_health(**healthy(**overrides))
    assert not health.stable
    assert len(health.reasons) == 1
    assert words in health.reasons[0]
    failed = [c for c in health.checks if not c.passed]
    assert [c.name for c in failed] == [check]
    assert failed[0].severity == "unstable"


@pytest.mark.parametrize(
    "overrides",
    [{"makespan_s": 20.0}, {"lateness_p99_s": 0.020}, {"client_cpu_share": 0.9}, {"client_generated_tok_s": 203.9},
     {"front_end_starved": 0.05}],
)
def test_values_at_or_inside_the_limits_pass(overrides):
    assert run_health(**healthy(**overrides)).stable


def test_loop_lag_is_only_a_note_when_engine_steps_exist():
    health = run_health(**healthy(loop_lag_p99_s=0.080))
    assert health.stable
    assert health.reasons == []
    assert health.notes == ["client event loop lagged: p99 80 ms"]


@pytest.mark.parametrize(
    "engine",
    [None, EngineMetrics(0, math.nan, 0, math.nan, math.nan, math.nan)],
    ids=["no step log", "empty step log"],
)
def test_loop_lag_makes_the_run_unstable_without_engine_steps(engine):
    health = run_health(**healthy(loop_lag_p99_s=0.080, engine=engine))
    assert not health.stable
    assert health.reasons == ["client event loop lagged: p99 80 ms"]
    # Without engine steps there is nothing to agree with: no engine check is made.
    assert not names(health) & {"client vs engine", "token count", "front-end starvation"}


def test_a_late_burst_is_a_note_when_the_engine_says_it_was_not_starved():
    # 600 requests due at once take any client a few hundred ms to send; the engine's
    # log says whether it waited for them (front-end starvation), and it did not.
    health = run_health(**healthy(burst=True, lateness_p99_s=0.380))
    assert health.stable
    assert health.notes == ["client sent late: p99 380 ms behind plan"]


def test_a_late_send_is_unstable_when_paced():
    health = run_health(**healthy(burst=False, lateness_p99_s=0.380))
    assert health.reasons == ["client sent late: p99 380 ms behind plan"]


@pytest.mark.parametrize(("makespan_s", "verdict"), [(60.0, "passes"), (10.0, "precision")])
def test_a_late_burst_without_engine_steps_is_judged_as_a_share_of_the_run(makespan_s, verdict):
    # Against a server the harness did not launch: 400 requests due at once left the client 95-380 ms
    # behind; a late send delays when a request can start, so it moves throughput by at most that share.
    health = run_health(**healthy(burst=True, lateness_p99_s=0.380, engine=None, makespan_s=makespan_s))
    if verdict == "passes":
        assert health.stable and health.reasons == []
    else:
        assert health.reasons[-1] == "client sent the burst late: p99 380 ms behind plan, 3.8% of the run"
        assert not health.beyond_precision  # a warning on that run in its cell and headline row


def test_client_and_engine_throughput_may_differ_under_open_loop_arrivals_but_not_their_tokens():
    # Static's batch delay holds the engine's first step back by up to 1 s after the first arrival.
    disagreeing = healthy(client_generated_tok_s=192.0)
    assert run_health(**disagreeing).reasons == ["client and engine throughput differ by -4.0%"]
    open_loop = run_health(**disagreeing, open_loop=True)
    assert open_loop.stable and open_loop.notes == ["client and engine throughput differ by -4.0%"]
    miscounted = run_health(**healthy(client_generated_tokens=11_000), open_loop=True)
    assert not miscounted.stable


def test_without_engine_steps_a_lag_inside_the_limit_is_stable():
    assert run_health(**healthy(engine=None)).stable


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"metrics_latency_p99_s": 0.400}, "/metrics answered slowly: p99 400 ms"),
        ({"telemetry_max_gap_s": 2.5}, "gap of 2.5 s"),
        ({"coalesced_share": 0.6}, "60% of tokens arrived coalesced"),
    ],
)
def test_notes_do_not_change_the_verdict(overrides, words):
    health = run_health(**healthy(**overrides))
    assert health.stable
    assert health.reasons == []
    assert len(health.notes) == 1 and words in health.notes[0]


def test_unknown_values_skip_their_checks():
    health = run_health(**healthy(
        makespan_s=math.nan, lateness_p99_s=math.nan, loop_lag_p99_s=None, client_cpu_share=None,
        metrics_latency_p99_s=math.nan, telemetry_max_gap_s=math.nan, coalesced_share=math.nan,
        front_end_starved=math.nan,
    ))
    assert health.stable
    assert names(health) == {"client vs engine", "token count"}


def test_an_unknown_engine_rate_skips_the_agreement_but_not_the_token_count():
    engine = EngineMetrics(1, 0.0, 12_000, math.nan, math.nan, 0.0)
    health = run_health(**healthy(engine=engine, client_generated_tokens=5))
    assert "client vs engine" not in names(health)
    assert health.reasons == ["client received 5 tokens, engine generated 12000"]


def test_several_failures_give_several_reasons():
    health = run_health(**healthy(makespan_s=5.0, client_cpu_share=1.0))
    assert not health.stable
    assert len(health.reasons) == 2


def unstable_run(text="run lasted 5.0 s"):
    return Health((Check("makespan", 5.0, 20.0, False, "unstable", text),))


def test_a_cell_of_three_close_runs_is_stable():
    estimate = median_ci([100.0, 101.0, 102.0])  # n=3: interval [100, 102], half-width 1/101
    health = cell_health(estimate, [run_health(**healthy())] * 3)
    assert health.stable
    interval = next(c for c in health.checks if c.name == "interval")
    assert interval.value == pytest.approx(1 / 101)


@pytest.mark.parametrize("values", [[100.0], [100.0, 101.0]])
def test_a_cell_needs_three_repetitions(values):
    health = cell_health(median_ci(values), [Health(())] * len(values))
    assert not health.stable
    assert health.reasons[0].startswith(f"{len(values)} repetition(s), fewer than 3")


def test_a_single_run_cell_has_no_interval_check():
    assert {c.name for c in cell_health(median_ci([100.0]), [Health(())]).checks} == {"repetitions"}


def test_a_wide_interval_is_a_warning_on_the_cell():
    # A cell's absolute figure is not what the report claims: the headline's ratios are judged.
    estimate = median_ci([90.0, 100.0, 110.0])  # half-width 10 / 100
    health = cell_health(estimate, [Health(())] * 3)
    assert health.stable and health.reasons == []
    assert health.notes == ["repetitions spread ±10.0% around the median"]


def test_half_width_just_inside_and_outside_five_percent():
    assert cell_health(median_ci([95.5, 100.0, 104.5]), [Health(())] * 3).notes == []  # 4.5%
    assert cell_health(median_ci([94.5, 100.0, 105.5]), [Health(())] * 3).notes != []  # 5.5%


def test_an_unstable_run_makes_the_cell_unstable_and_says_why():
    estimate = median_ci([100.0, 100.5, 101.0])
    starved = Health((Check("front-end starvation", 0.1, 0.05, False, "unstable", "the front end set the pace"),))
    health = cell_health(estimate, [Health(()), starved, unstable_run("run lasted 5.0 s")])
    assert not health.stable
    assert health.reasons == ["1 of 3 runs unstable (the front end set the pace)"]
    assert health.notes == ["1 of 3 runs with a warning (run lasted 5.0 s): the ratio's repetitions show whether it"
                            " moved the figure"]


def tokens(rows):
    return pd.DataFrame(rows, columns=["request_id", "token_index", "t_s"])


def test_coalesced_share_counts_tokens_sharing_a_timestamp_within_a_request():
    frame = tokens([
        # request 0: token 1 arrived in the same chunk as token 0; the rest apart.
        (0, 0, 1.0), (0, 1, 1.0), (0, 2, 1.1), (0, 3, 1.2),
        # request 1's first token arrives at request 0's last timestamp: a different request, not coalesced.
        (1, 0, 1.2), (1, 1, 1.3),
    ])
    assert coalesced_share(frame) == pytest.approx(1 / 6)


def test_coalesced_share_orders_by_request_and_token_index():
    # Same tokens as above, shuffled; plus request 2 whose tokens 1 and 2 share a chunk.
    frame = tokens([
        (2, 2, 5.5), (1, 1, 1.3), (0, 3, 1.2), (2, 0, 5.0), (0, 1, 1.0),
        (1, 0, 1.2), (2, 1, 5.5), (0, 2, 1.1), (0, 0, 1.0),
    ])
    assert coalesced_share(frame) == pytest.approx(2 / 9)


def test_coalesced_share_of_a_whole_chunk_and_of_no_tokens():
    assert coalesced_share(tokens([(0, i, 2.0) for i in range(4)])) == pytest.approx(3 / 4)
    assert coalesced_share(tokens([(0, 0, 1.0), (1, 0, 1.0), (2, 0, 1.0)])) == 0.0
    assert math.isnan(coalesced_share(tokens([])))


def telemetry(rows):
    return pd.DataFrame(rows, columns=["t", "latency_s"])


def test_telemetry_stats_p99_latency_and_longest_gap():
    # Polls out of order: sorted 0, 0.5, 1.0, 2.5, 3.0 -> longest gap 1.5 s. A NaN latency is dropped.
    frame = telemetry([(1.0, 0.03), (0.0, 0.01), (2.5, 1.0), (0.5, 0.02), (3.0, 0.04), (2.0, math.nan)])
    p99, gap = telemetry_stats(frame)
    # Latencies 0.01..0.04, 1.0: p99 at position 3.96 -> 0.04 + 0.96 * (1.0 - 0.04).
    assert p99 == pytest.approx(0.04 + 0.96 * 0.96)
    assert gap == pytest.approx(1.0)  # with the poll at 2.0 the gaps are 0.5, 0.5, 1.0, 0.5, 0.5


def test_telemetry_stats_longest_gap_without_the_middle_poll():
    _, gap = telemetry_stats(telemetry([(1.0, 0.03), (0.0, 0.01), (2.5, 1.0), (0.5, 0.02), (3.0, 0.04)]))
    assert gap == pytest.approx(1.5)


def test_telemetry_stats_unknown_when_too_few_polls_or_no_latency():
    assert all(math.isnan(x) for x in telemetry_stats(telemetry([(0.0, 0.01)])))
    assert all(math.isnan(x) for x in telemetry_stats(telemetry([])))
    p99, gap = telemetry_stats(telemetry([(0.0, math.nan), (2.0, math.nan)]))
    assert math.isnan(p99) and gap == pytest.approx(2.0)


def engine(steps, median_step_ms):
    return EngineMetrics(steps, 30.0, 12_000, 400.0, 0.95, median_step_ms / 1000)


def test_a_cell_spread_by_the_machine_alone_gets_a_warning_not_unstable():
    estimate = median_ci([6706.0, 8615.0, 8218.0])
    health = cell_health(estimate, [Health(())] * 3, [engine(1365, 11.88), engine(1365, 9.34), engine(1364, 9.97)])
    assert health.stable and health.reasons == []
    assert health.notes == [
        "repetitions spread ±11.6% around the median (same schedule (1364-1365 engine steps) at median"
        " step times of 9.3-11.9 ms (±13%): the machine's speed varied, not the scheduler)"
    ]


def test_a_spread_cell_whose_schedule_differed_says_so():
    estimate = median_ci([3466.0, 3093.0, 3369.0])
    health = cell_health(estimate, [Health(())] * 3, [engine(5000, 4.6), engine(5600, 5.7), engine(5300, 5.0)])
    assert health.stable
    assert health.notes[0].startswith("repetitions spread ±5.5% around the median (the schedule differed")


def test_the_cell_and_the_headline_share_one_rule_for_a_schedule_that_differed():
    # Static at cap 512 in the reference report: 7,375-7,663 steps (±1.9%), the cell spread ±11.6%. It was
    # "the schedule differed" (UNSTABLE) in its cell and "stable" in the headline; one rule now says the same in both.
    engines = [engine(7375, 4.0), engine(7663, 5.2), engine(7500, 4.6)]
    health = cell_health(median_ci([4401.0, 3948.0, 4966.0]), [Health(())] * 3, engines)
    assert health.stable and health.notes[0].endswith("the machine's speed varied, not the scheduler)")
    assert schedule_check(engines) is not None and schedule_check(engines).passed


def test_a_spread_cell_at_a_steady_step_time_names_neither_cause():
    # Same schedule, step times within ±5%: the machine's speed does not explain the spread, nor the schedule.
    estimate = median_ci([6706.0, 8615.0, 8218.0])
    health = cell_health(estimate, [Health(())] * 3, [engine(1365, 10.0), engine(1365, 10.4), engine(1365, 10.2)])
    assert health.notes[0].startswith("repetitions spread ±11.6% around the median (same schedule")


def test_a_narrow_cell_keeps_the_speed_check_as_a_note():
    health = cell_health(median_ci([100.0, 100.5, 101.0]), [Health(())] * 3,
                         [engine(1000, 10.0), engine(1000, 12.0), engine(1000, 10.0)])
    assert health.stable
    assert health.notes == ["same schedule (1000-1000 engine steps) at median step times of 10.0-12.0 ms (±10%):"
                            " the machine's speed varied, not the scheduler"]


def test_a_different_schedule_is_named_as_such():
    health = cell_health(median_ci([100.0, 100.5, 101.0]), [Health(())] * 3,
                         [engine(1000, 10.0), engine(1120, 10.0), engine(1000, 10.0)])
    speed = next(check for check in health.checks if check.name == "machine speed")
    assert speed.passed and speed.text.startswith("the schedule differed between repetitions: 1000-1120 engine steps")


@pytest.mark.parametrize("engines", [(), (None, None, None), (engine(1000, 10.0),)], ids=["none", "unknown", "one"])
def test_no_speed_note_without_two_engine_logs(engines):
    names = {check.name for check in cell_health(median_ci([1.0, 2.0, 3.0]), [Health(())] * 3, engines).checks}
    assert "machine speed" not in names


def test_a_client_above_ninety_percent_cpu_is_called_client_bound_in_plain_words():
    health = run_health(**healthy(client_cpu_share=0.97))
    assert health.client_bound == health.reasons
    assert "client-bound" in health.reasons[0] and "97% of a core" in health.reasons[0]
    assert "--workers N" in health.reasons[0]


@pytest.mark.parametrize(("engine", "severity"), [(ENGINE, "note"), (None, "unstable")], ids=["engine", "client only"])
def test_a_loop_lag_over_five_percent_of_the_median_itl_is_client_bound(engine, severity):
    # 0.6 ms of median lag against tokens 10 ms apart: 6% of every gap is the client's.
    health = run_health(**healthy(loop_lag_p50_s=0.0006, median_itl_s=0.010, engine=engine))
    check = next(c for c in health.checks if c.name == "client loop lag vs ITL")
    assert not check.passed and check.severity == severity
    assert check.value == pytest.approx(0.06)
    assert health.client_bound == [check.text]
    assert "client-bound" in check.text and "0.60 ms" in check.text and "10.00 ms" in check.text
    assert "--workers N" in check.text
    assert health.stable == (severity == "note")


def test_a_lag_of_five_percent_or_less_is_not_client_bound():
    health = run_health(**healthy(loop_lag_p50_s=0.0005, median_itl_s=0.010))
    assert health.client_bound == []
    assert "client loop lag vs ITL" in names(health)


@pytest.mark.parametrize("itl", [0.0, math.nan], ids=["zero", "unknown"])
def test_no_lag_against_itl_check_without_a_positive_itl(itl):
    health = run_health(**healthy(loop_lag_p50_s=0.001, median_itl_s=itl))
    assert "client loop lag vs ITL" not in names(health)
    assert health.client_bound == []


def test_a_lag_many_times_the_itl_is_said_as_a_multiple():
    health = run_health(**healthy(loop_lag_p50_s=0.015, median_itl_s=0.00002))
    assert "750x the median inter-token time" in health.client_bound[0]
