"""Writing a gate verdict where people and CI systems look: stdout and the asked-for files."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.gate.compare import GateResult
from harness.gate.output import to_json, to_junit_xml, to_markdown, to_text


@dataclass(frozen=True)
class GateDestinations:
    """Files to write the verdict to; None: not asked for."""

    junit_xml: Path | None = None
    json: Path | None = None
    markdown: Path | None = None
    # $GITHUB_STEP_SUMMARY: the Markdown is appended, as GitHub Actions expects.
    step_summary: Path | None = None


def publish(result: GateResult, to: GateDestinations) -> None:
    """Print the table to stdout and write every requested file."""
    sys.stdout.write(to_text(result))
    sys.stdout.flush()
    for path, text in ((to.junit_xml, to_junit_xml), (to.json, to_json), (to.markdown, to_markdown)):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(result), encoding="utf-8")
    if to.step_summary is not None:
        with to.step_summary.open("a", encoding="utf-8") as summary:
            summary.write(to_markdown(result))
