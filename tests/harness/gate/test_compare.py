"""The gate over configurations: grouping, metric choice, set-aside repetitions, first nights, the worst outcome."""

from __future__ import annotations

import pytest

from harness.gate.compare import BaselineSample, choose_metric, gate, judge_config
from harness.gate.rule import GateRule

RULE = GateRule()
STEADY = [1000.0, 1010.0, 990.0, 1005.0, 995.0]


def baseline(make_night, values=STEADY, nights=1, **changes):
    return BaselineSample(tuple(tuple(make_night(f"b{n}", n, values, **changes)) for n in range(nights)), "test")


def test_a_ten_percent_drop_is_a_regression_and_the_same_figures_pass(make_night):
    base = baseline(make_night, nights=3)
    slower = make_night("c", 10, [v * 0.9 for v in STEADY])
    same = make_night("c", 10, STEADY)
    verdict = judge_config(slower, base, RULE, metric="total_tok_s")
    assert verdict.outcome == "regression" and verdict.metric == "total_tok_s"
    assert verdict.verdict is not None and verdict.verdict.ratio.point == pytest.approx(0.9, abs=0.01)
    assert verdict.baseline is not None and verdict.baseline.n == 15
    assert judge_config(same, base, RULE, metric="total_tok_s").outcome == "pass"


def test_the_engine_figure_is_compared_when_every_repetition_has_it(make_repetition):
    assert choose_metric("auto", [make_repetition(), make_repetition()]) == "engine_total_tok_s"
    assert choose_metric("auto", [make_repetition(), make_repetition(engine_total_tok_s=None)]) == "total_tok_s"
    assert choose_metric("output_tok_s", [make_repetition()]) == "output_tok_s"


def test_open_loop_repetitions_are_judged_on_their_median_latency(make_repetition):
    poisson = make_repetition(arrival="poisson")
    assert choose_metric("auto", [poisson, make_repetition(arrival="unknown")]) == "e2e_p50_s"
    # At one machine speed when every repetition has the figure (runs with an engine log).
    at_speed = make_repetition(arrival="poisson", e2e_p50_at_one_speed_s=0.9)
    assert choose_metric("auto", [at_speed, at_speed]) == "e2e_p50_at_one_speed_s"
    assert choose_metric("auto", [at_speed, poisson]) == "e2e_p50_s"
    assert choose_metric("auto", [make_repetition(arrival="burst"), poisson]) == "engine_total_tok_s"
    assert choose_metric("total_tok_s", [poisson]) == "total_tok_s"


def latency_night(make_night, name, day, latencies):
    return [row.model_copy(update={"e2e_p50_s": latency})
            for row, latency in zip(make_night(name, day, STEADY, arrival="poisson"), latencies, strict=True)]


def test_a_rise_in_latency_is_a_regression_and_a_fall_is_not(make_night):
    steady = [s / 1000 for s in STEADY]  # seconds, around 1 s
    base = BaselineSample(tuple(tuple(latency_night(make_night, f"b{n}", n, steady)) for n in range(3)), "test")
    slower = judge_config(latency_night(make_night, "c", 10, [v * 1.12 for v in steady]), base, RULE)
    assert slower.metric == "e2e_p50_s" and slower.outcome == "regression"
    # The ratio reads as for throughput: baseline latency over candidate latency, below 1 when worse.
    assert slower.verdict is not None and slower.verdict.ratio.point == pytest.approx(1 / 1.12, abs=0.01)
    # The estimates stay in seconds.
    assert slower.candidate.point == pytest.approx(1.12, abs=0.02)
    assert slower.baseline is not None and slower.baseline.point == pytest.approx(1.0, abs=0.01)
    assert judge_config(latency_night(make_night, "c", 10, [v * 0.88 for v in steady]), base, RULE).outcome == "pass"
    assert judge_config(latency_night(make_night, "c", 10, steady), base, RULE).outcome == "pass"


def test_an_unstable_repetition_is_set_aside_and_the_rest_decide(make_night):
    base = baseline(make_night, nights=2)
    candidate = make_night("c", 10, STEADY)
    candidate[0] = candidate[0].model_copy(update={"stable": False, "health_reasons": ("run lasted 9.0 s",),
                                                   "total_tok_s": 10.0})
    verdict = judge_config(candidate, base, RULE, metric="total_tok_s")
    assert verdict.outcome == "pass" and verdict.candidate.n == 4
    assert "1 candidate repetitions set aside: UNSTABLE (run lasted 9.0 s)" in verdict.reasons


def test_too_few_stable_repetitions_or_any_failed_request_is_inconclusive(make_night):
    base = baseline(make_night, nights=2)
    mostly_unstable = make_night("c", 10, STEADY[:3]) + make_night("c", 10, STEADY[3:], stable=False)
    mostly_unstable[0] = mostly_unstable[0].model_copy(update={"stable": False})
    assert judge_config(mostly_unstable, base, RULE, metric="total_tok_s").outcome == "inconclusive"
    failed = make_night("c", 10, STEADY)
    failed[2] = failed[2].model_copy(update={"errors": 3})
    verdict = judge_config(failed, base, RULE, metric="total_tok_s")
    assert verdict.outcome == "inconclusive" and verdict.reasons[0] == "1 candidate repetitions had 3 failed requests"


def test_a_first_night_starts_the_baseline_only_in_a_nightly_and_only_when_usable(make_night):
    tonight = make_night("c", 0, STEADY)
    first = judge_config(tonight, None, RULE, first_night_passes=True)
    assert first.outcome == "pass" and first.reasons[0].startswith("first night of this configuration")
    assert judge_config(tonight, None, RULE).outcome == "inconclusive"
    assert judge_config(tonight[:2], None, RULE, first_night_passes=True).outcome == "inconclusive"


def test_the_gate_is_its_worst_configuration(make_night):
    base = baseline(make_night, nights=3)
    steady = make_night("c", 10, STEADY)
    dropped = make_night("c", 10, [v * 0.85 for v in STEADY], system="static")
    static_base = baseline(make_night, nights=3, system="static")
    result = gate([*steady, *dropped], {base.repetitions[0].config_key: base,
                                        static_base.repetitions[0].config_key: static_base}, RULE, "total_tok_s")
    assert [c.outcome for c in result.configs] == ["pass", "regression"]
    assert result.outcome == "regression" and result.exit_code == 1
    lone = gate(steady, {}, RULE)
    assert lone.outcome == "inconclusive" and lone.exit_code == 3
    assert gate(steady, {base.repetitions[0].config_key: base}, RULE).exit_code == 0


def test_a_configuration_without_engine_figures_is_judged_on_the_clients_and_says_so(make_night):
    engine = make_night("c", 10, STEADY)
    client = make_night("c", 10, STEADY, system="hf-continuous", engine_total_tok_s=None)
    result = gate([*engine, *client], {}, RULE)
    assert [config.metric for config in result.configs] == ["engine_total_tok_s", "total_tok_s"]
    (note,) = result.notes
    assert note.startswith("judged on the client's total tok/s, not the engine's") and "hf-continuous" in note
    assert gate(engine, {}, RULE).notes == ()
    assert gate(client, {}, RULE, metric="total_tok_s").notes == ()
