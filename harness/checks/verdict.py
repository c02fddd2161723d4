"""The verdict of `batchbench gpu-check`: one typed row per check, rendered three ways.

The terminal text, the Markdown file and the JSON file are all drawn from one
`Verdict` object, so they cannot disagree. A row holds the measured figure and the
threshold as numbers (JSON keeps them as such) and says in one line what they mean.
A skipped row (e.g. the GPU prediction on a machine without a GPU) neither passes nor
fails the verdict.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["pass", "fail", "skip"]
# "|x|<=": the figure's size either way; "low<=": the low end of its interval (not shown above).
Rule = Literal["<=", ">=", ">", "|x|<=", "low<="]
RULE_TEXT = {"<=": "<=", ">=": ">=", ">": ">", "|x|<=": "within +-", "low<=": "interval reaches <="}
VERDICT_MARKDOWN = "verdict.md"
VERDICT_JSON = "verdict.json"


class CheckRow(BaseModel):
    """One check: what was measured against which threshold, and what that means."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short name of the check.")
    status: Status = Field(description="pass, fail, or skip (not measured here; does not fail the verdict).")
    measured: float | None = Field(description="The measured figure, in `unit`; None when skipped.")
    rule: Rule = Field(description="How `measured` must compare with `threshold` to pass.")
    threshold: float = Field(description="The limit the figure is held to, in `unit`.")
    unit: str = Field(description="'%', 'x', 'of N', ... as the figure is read.")
    interval: tuple[float, float] | None = Field(None, description="95% interval of the figure, where it has one.")
    explanation: str = Field(description="One line: what was measured and why it passed or failed.")

    @property
    def passed(self) -> bool:
        return self.status != "fail"

    def figure(self) -> str:
        """The measured figure as a reader sees it, with its interval."""
        if self.measured is None:
            return "-"
        text = _number(self.measured, self.unit)
        if self.interval is not None:
            low, high = self.interval
            text += f" (95% {_number(low, self.unit)} to {_number(high, self.unit)})"
        return text

    def limit(self) -> str:
        return f"{RULE_TEXT[self.rule]} {_number(self.threshold, self.unit)}"


class Verdict(BaseModel):
    """Every check of one gpu-check run, and where and on what it ran."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(description="The GPU found by name, or 'cpu'.")
    model: str = Field(description="The model profile served.")
    batch_size: int = Field(description="B of the reproduction and the recorder check.")
    wall_s: float = Field(description="How long the whole check took.")
    rows: tuple[CheckRow, ...]
    notes: tuple[str, ...] = Field((), description="Lines shown under the table (e.g. what was skipped and why).")
    vllm: str = Field("unknown", description="The vLLM build checked, e.g. 'vllm 0.34.0'.")
    vllm_untested: str | None = Field(
        None, description="'UNTESTED VLLM ...' when that build is outside the tested releases (run with"
        " --allow-untested-vllm); None for a tested one.")

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def headline(self) -> str:
        untested = f" ({self.vllm_untested})" if self.vllm_untested else ""
        failed = [row.name for row in self.rows if not row.passed]
        if failed:
            return f"FAIL: {len(failed)} of {len(self.rows)} checks failed ({', '.join(failed)}){untested}"
        skipped = sum(row.status == "skip" for row in self.rows)
        return f"PASS: {len(self.rows) - skipped} of {len(self.rows)} checks passed" + (
            f", {skipped} skipped" if skipped else ""
        ) + untested

    def setting(self) -> str:
        return f"{self.device}, {self.vllm}, model {self.model}, B = {self.batch_size}, {self.wall_s / 60:.1f} min"


def render_terminal(verdict: Verdict) -> str:
    """Aligned plain-text table, headline first."""
    header = ("check", "status", "measured", "threshold", "why")
    table = [header, *((r.name, r.status.upper(), r.figure(), r.limit(), r.explanation) for r in verdict.rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    lines = [f"gpu-check {verdict.headline}", f"  {verdict.setting()}"]
    lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
              for row in table]
    lines += [f"  note: {note}" for note in verdict.notes]
    return "\n".join(lines)


def render_markdown(verdict: Verdict) -> str:
    """A Markdown section: headline, setting, the table, the notes."""
    lines = [f"# gpu-check: {verdict.headline}", "", verdict.setting(), "",
             "| check | status | measured | threshold | why |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r.name} | **{r.status.upper()}** | {r.figure()} | {r.limit()} | {_cell(r.explanation)} |"
              for r in verdict.rows]
    if verdict.notes:
        lines += ["", *(f"- {note}" for note in verdict.notes)]
    return "\n".join(lines) + "\n"


def render_json(verdict: Verdict) -> str:
    """The verdict as JSON: every row's numbers, plus `passed` for the whole and for each row."""
    data = verdict.model_dump(mode="json")
    data["passed"] = verdict.passed
    for row, dumped in zip(verdict.rows, data["rows"], strict=True):
        dumped["passed"] = row.passed
    return json.dumps(data, indent=2) + "\n"


def write_verdict(verdict: Verdict, out: Path) -> tuple[Path, Path]:
    """Write verdict.md and verdict.json into `out`; returns their paths."""
    markdown, as_json = out / VERDICT_MARKDOWN, out / VERDICT_JSON
    markdown.write_text(render_markdown(verdict))
    as_json.write_text(render_json(verdict))
    return markdown, as_json


def _number(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return str(value)
    if unit == "%":
        return f"{value:.2f}%"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "tok/s":
        return f"{value:,.0f} tok/s"
    return f"{value:g} {unit}".strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
