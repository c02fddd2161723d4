"""The gate's verdict written out: a terminal table, Markdown, JUnit XML and JSON.

Only formatting: every figure comes computed in a GateResult (harness.gate.compare).
"""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from typing import Any

from harness.analysis.stats import Estimate
from harness.gate.compare import ConfigVerdict, GateResult
from harness.gate.rule import format_figure

# Each interval is followed by how often such an interval holds the true value (the range of 3 values: 75%).
HEADER = ("configuration", "metric", "baseline [interval, coverage]", "candidate [interval, coverage]",
          "ratio [interval, coverage]", "p", "verdict", "why")
VERDICT_WORDS = {"pass": "PASS", "regression": "REGRESSION", "inconclusive": "INCONCLUSIVE"}


def _estimate(value: Estimate | None, metric: str) -> str:
    if value is None or not math.isfinite(value.point):
        return "-"
    return (f"{format_figure(metric, value.point)} [{format_figure(metric, value.low)}-"
            f"{format_figure(metric, value.high)}, {_coverage(value)}] n={value.n}")


def _coverage(value: Estimate) -> str:
    return f"{value.coverage:.0%}" if math.isfinite(value.coverage) else "no coverage claimed"


def _ratio(config: ConfigVerdict) -> str:
    if config.verdict is None:
        return "-"
    ratio = config.verdict.ratio
    return f"{ratio.point:.3f} [{ratio.low:.3f}-{ratio.high:.3f}, {_coverage(ratio)}]"


def _p(config: ConfigVerdict) -> str:
    return f"{config.verdict.p_value:.3g}" if config.verdict is not None else "-"


def configuration(config: ConfigVerdict) -> str:
    """A configuration's name as the outputs show it: its label, then its upgrade when it is one."""
    return f"{config.label} (upgrade {config.upgrade})" if config.upgrade else config.label


def why(config: ConfigVerdict) -> str:
    """Every reason of a verdict in one line, after its upgrade when it is one."""
    reasons = "; ".join(config.reasons)
    return f"upgrade {config.upgrade}, against {config.baseline_description}: {reasons}" if config.upgrade else reasons


def rows(result: GateResult) -> list[tuple[str, ...]]:
    """One row of formatted cells per configuration, in HEADER's order."""
    return [
        (configuration(config), config.metric, _estimate(config.baseline, config.metric),
         _estimate(config.candidate, config.metric), _ratio(config),
         _p(config), VERDICT_WORDS[config.outcome], config.reasons[0])
        for config in result.configs
    ]


def summary_line(result: GateResult) -> str:
    """The gate's outcome in one line, with its exit code."""
    counts = {outcome: sum(c.outcome == outcome for c in result.configs) for outcome in VERDICT_WORDS}
    parts = ", ".join(f"{n} {VERDICT_WORDS[outcome].lower()}" for outcome, n in counts.items() if n)
    return (f"gate: {VERDICT_WORDS[result.outcome]} ({parts or 'no configuration'}; threshold"
            f" {result.rule.threshold:.0%}, alpha {result.rule.alpha:g}) -> exit {result.exit_code}")


def answer(result: GateResult) -> str:
    """The gate's outcome in plain words, naming the configurations that decided it (the reader of a nightly e-mail
    reads this first). Where the noise between nights widened a configuration's line past the threshold asked, it
    says the line applied: a pass at 14% says less than one at 5%."""
    if not result.configs:
        return "INCONCLUSIVE: no configuration was measured."
    asked = result.rule.threshold
    widened = [config for config in result.configs if _line(config, asked) > asked + 1e-9]
    if result.outcome == "pass":
        if not widened:
            return (f"PASS: no configuration ran more than {asked:.0%} below its baseline"
                    f" ({len(result.configs)} judged).")
        coarsest = max(_line(config, asked) for config in widened)
        return (f"PASS, at a coarser line than asked: no configuration ran more than {coarsest:.1%} below its baseline"
                f" ({len(result.configs)} judged; the {asked:.0%} asked was widened to 3x the noise between nights for"
                f" {len(widened)}).")
    deciding = [config for config in result.configs if config.outcome == result.outcome]
    named = "; ".join(f"{configuration(config)}{_change(config, asked)}" for config in deciding)
    if result.outcome == "regression":
        return f"REGRESSION: {len(deciding)} of {len(result.configs)} ran below their baseline's line: {named}."
    return (f"INCONCLUSIVE: for {len(deciding)} of {len(result.configs)} the runs could not tell a drop from noise:"
            f" {named}.")


def _line(config: ConfigVerdict, asked: float) -> float:
    """The drop a configuration was judged against: the threshold asked, or wider where the noise widened it."""
    return config.verdict.effective_threshold if config.verdict is not None else asked


def _change(config: ConfigVerdict, asked: float) -> str:
    if config.verdict is None or not math.isfinite(config.verdict.ratio.point):
        return ""
    return f" ({config.verdict.ratio.point - 1:+.1%} against a {_line(config, asked):.1%} line)"


def to_text(result: GateResult) -> str:
    """A plain-text table for the terminal, then the outcome line."""
    table = [HEADER, *rows(result)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
             for row in table]
    return "\n".join([*lines, *result.notes, summary_line(result)]) + "\n"


def to_markdown(result: GateResult) -> str:
    """The same table in Markdown (for $GITHUB_STEP_SUMMARY or a PR comment)."""
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    parts = [f"## Regression gate: {VERDICT_WORDS[result.outcome]}", "", line(HEADER), line(("---",) * len(HEADER))]
    parts += [line(row) for row in rows(result)]
    details = [f"- **{configuration(c)}** ({VERDICT_WORDS[c.outcome]}, baseline: {c.baseline_description}): "
               + "; ".join(c.reasons) for c in result.configs]
    return "\n".join([*parts, "", *details, *[f"- {note}" for note in result.notes], "", summary_line(result)]) + "\n"


def to_junit_xml(result: GateResult) -> str:
    """JUnit XML, one test case per configuration: a regression fails, inconclusive is skipped.

    A case is named by the configuration's label alone, so that it stays one test across server
    builds; an upgrade is said in its message.
    """
    suite = ET.Element("testsuite", name="batchbench gate", tests=str(len(result.configs)),
                       failures=str(sum(c.outcome == "regression" for c in result.configs)),
                       skipped=str(sum(c.outcome == "inconclusive" for c in result.configs)))
    for config in result.configs:
        case = ET.SubElement(suite, "testcase", classname="batchbench.gate", name=config.label)
        message = why(config)
        if config.outcome == "regression":
            ET.SubElement(case, "failure", message=message, type="regression").text = message
        elif config.outcome == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive: {message}")
        ET.SubElement(case, "system-out").text = message
    text: str = ET.tostring(suite, encoding="unicode", xml_declaration=True)
    return text + "\n"


def _estimate_json(value: Estimate | None) -> dict[str, Any] | None:
    if value is None or not math.isfinite(value.point):
        return None
    return {"median": value.point, "low": value.low, "high": value.high, "n": value.n, "method": value.method,
            "coverage": value.coverage if math.isfinite(value.coverage) else None}


def to_json(result: GateResult) -> str:
    """Every figure of the result, for machines."""
    configs = []
    for config in result.configs:
        verdict = config.verdict
        configs.append({
            "configuration": config.label,
            "config_key": config.config_key,
            "metric": config.metric,
            "outcome": config.outcome,
            "reasons": list(config.reasons),
            "baseline_source": config.baseline_description,
            "upgrade": config.upgrade,
            "baseline": _estimate_json(config.baseline),
            "candidate": _estimate_json(config.candidate),
            "ratio": _estimate_json(verdict.ratio) if verdict else None,
            "p_value": verdict.p_value if verdict else None,
            "margin_p_value": verdict.margin_p_value if verdict else None,
            "effective_threshold": verdict.effective_threshold if verdict else None,
            "between_night_noise": verdict.noise if verdict else None,
        })
    document = {
        "outcome": result.outcome,
        "exit_code": result.exit_code,
        "rule": dataclasses.asdict(result.rule),
        "notes": list(result.notes),
        "configurations": configs,
    }
    return json.dumps(document, indent=2) + "\n"
