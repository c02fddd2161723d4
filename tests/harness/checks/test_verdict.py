"""The gpu-check verdict: one object, three renderings that say the same thing."""

from __future__ import annotations

import json

from harness.checks.verdict import CheckRow, Verdict, render_json, render_markdown, render_terminal, write_verdict


def row(name: str, status: str, measured: float | None = 1.0) -> CheckRow:
    return CheckRow(name=name, status=status, measured=measured, rule="<=", threshold=0.5, unit="%",
                    explanation=f"why {name}")


def verdict(*rows: CheckRow) -> Verdict:
    return Verdict(device="cpu", model="tiny", batch_size=16, wall_s=90.0, rows=rows, notes=("a note",))


def test_a_skipped_row_neither_passes_nor_fails_the_verdict():
    skipped = verdict(row("a", "pass"), row("b", "skip", None))
    assert skipped.passed and skipped.headline == "PASS: 1 of 2 checks passed, 1 skipped"
    failed = verdict(row("a", "pass"), row("b", "fail"), row("c", "skip", None))
    assert not failed.passed and failed.headline == "FAIL: 1 of 3 checks failed (b)"


def test_terminal_markdown_and_json_carry_every_row_from_the_one_object(tmp_path):
    shown = verdict(row("steps", "pass", 0.12), row("cost", "fail", 3.0), row("paper", "skip", None))
    terminal, markdown = render_terminal(shown), render_markdown(shown)
    assert terminal.splitlines()[0] == "gpu-check FAIL: 1 of 3 checks failed (cost)"
    assert markdown.splitlines()[0] == "# gpu-check: FAIL: 1 of 3 checks failed (cost)"
    for text in (terminal, markdown):
        assert "0.12%" in text and "3.00%" in text and "<= 0.50%" in text and "why paper" in text and "a note" in text
    data = json.loads(render_json(shown))
    assert data["passed"] is False
    assert [(r["name"], r["status"], r["passed"], r["measured"]) for r in data["rows"]] == [
        ("steps", "pass", True, 0.12), ("cost", "fail", False, 3.0), ("paper", "skip", True, None)]
    markdown_path, json_path = write_verdict(shown, tmp_path)
    assert markdown_path.read_text() == markdown
    assert Verdict.model_validate({k: v for k, v in json.loads(json_path.read_text()).items() if k != "passed"}
                                  | {"rows": [{k: v for k, v in r.items() if k != "passed"}
                                              for r in data["rows"]]}) == shown


def test_a_figure_with_an_interval_shows_it_and_its_rule():
    cost = CheckRow(name="cost", status="pass", measured=0.4, rule="low<=", threshold=1.0, unit="%",
                    interval=(-1.5, 2.25), explanation="x")
    assert cost.figure() == "0.40% (95% -1.50% to 2.25%)"
    assert cost.limit() == "interval reaches <= 1.00%"


def test_the_verdict_names_the_vllm_checked_and_an_untested_one_in_its_headline():
    tested = verdict(row("a", "pass")).model_copy(update={"vllm": "vllm 0.34.0"})
    assert "vllm 0.34.0" in render_terminal(tested).splitlines()[1] and "UNTESTED" not in render_markdown(tested)
    marking = "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)"
    untested = tested.model_copy(update={"vllm": "vllm 0.35.0", "vllm_untested": marking})
    assert untested.headline == f"PASS: 1 of 1 checks passed ({marking})"
    assert render_markdown(untested).splitlines()[0] == f"# gpu-check: PASS: 1 of 1 checks passed ({marking})"
    assert json.loads(render_json(untested))["vllm_untested"] == marking
