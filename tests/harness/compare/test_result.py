"""A comparison's runs paired by (workload, system, repetition) and judged: the figure, faults, the outcome."""

from __future__ import annotations

from harness.compare.result import PairedRun, judge_comparison

A_TOK_S = [1000.0, 1012.0, 995.0, 1004.0, 998.0]


def runs(make_repetition, side, values, system="continuous", **changes):
    return [PairedRun(side, rep, make_repetition(system=system, engine_total_tok_s=value, total_tok_s=value * 0.98,
                                                 **changes), None)
            for rep, value in enumerate(values, start=1)]


def judged(a, b):
    return judge_comparison("A build", "B build", [*a, *b], threshold=0.03, pair_noise=0.02, expected_detectable=0.04)


def test_a_ten_percent_slower_b_is_a_regression_judged_on_the_engines_figure(make_repetition):
    result = judged(runs(make_repetition, "a", A_TOK_S), runs(make_repetition, "b", [v * 0.9 for v in A_TOK_S]))
    (cell,) = result.cells
    assert (cell.metric, cell.outcome, result.outcome, result.exit_code) == (
        "engine_total_tok_s", "regression", "regression", 1)
    assert cell.verdict is not None and abs(cell.verdict.ratio - 0.9) < 1e-9
    assert cell.client is not None and cell.client.outcome == "regression"


def test_the_same_build_passes_and_each_system_is_judged_apart(make_repetition):
    a = runs(make_repetition, "a", A_TOK_S) + runs(make_repetition, "a", A_TOK_S, system="static")
    b = runs(make_repetition, "b", [v * 1.001 for v in A_TOK_S]) + runs(
        make_repetition, "b", [v * 0.9 for v in A_TOK_S], system="static")
    result = judged(a, b)
    assert {cell.system: cell.outcome for cell in result.cells} == {"continuous": "pass", "static": "regression"}
    assert result.outcome == "regression"


def test_failed_requests_make_the_cell_inconclusive_whatever_the_figures(make_repetition):
    b = runs(make_repetition, "b", [v * 0.9 for v in A_TOK_S])
    b[2] = PairedRun("b", 3, b[2].row.model_copy(update={"errors": 4}), None)
    result = judged(runs(make_repetition, "a", A_TOK_S), b)
    (cell,) = result.cells
    assert (cell.outcome, result.exit_code) == ("inconclusive", 3)
    assert cell.notes[0].startswith("4 failed requests")


def test_without_an_engine_log_on_one_run_the_clients_figure_is_judged(make_repetition):
    a = runs(make_repetition, "a", A_TOK_S)
    a[0] = PairedRun("a", 1, a[0].row.model_copy(update={"engine_total_tok_s": None}), None)
    (cell,) = judged(a, runs(make_repetition, "b", A_TOK_S)).cells
    assert cell.metric == "total_tok_s" and cell.client is None
    assert "judged on the client's total tok/s" in " ".join(cell.notes)


def test_a_repetition_with_one_side_only_is_left_out_and_said(make_repetition):
    (cell,) = judged(runs(make_repetition, "a", A_TOK_S), runs(make_repetition, "b", A_TOK_S[:3])).cells
    assert len(cell.a_values) == len(cell.b_values) == 3
    assert cell.notes[0] == "2 repetitions lack a run on one side: left out"


def test_the_report_leads_with_the_answer_the_two_builds_and_what_both_ran(make_repetition):
    from harness.compare.report import comparison_blocks
    from harness.report.document import Bullets, Heading

    setup = ("model: tiny: 4-layer Llama", "machine: vm (AMD EPYC, 2 cores, 23.5 GiB)")
    b = runs(make_repetition, "b", A_TOK_S)
    b[0] = PairedRun("b", 1, b[0].row.model_copy(update={"stable": False, "health_reasons": ["run lasted 19 s"]}), None)
    result = judge_comparison("A build", "B build", [*runs(make_repetition, "a", A_TOK_S), *b], threshold=0.03,
                              pair_noise=0.02, expected_detectable=0.04, setup=setup)
    blocks = comparison_blocks(result)
    assert blocks[0] == Heading("B against A: PASS", 1)
    assert blocks[2] == Bullets(("A: A build", "B: B build", *setup))
    assert result.cells[0].notes[0].startswith("1 run flagged by the run's own health check (run lasted 19 s)")
