"""Write the report: report.md (+ images/*.png), a self-contained report.html, summary.json.

`render_report` lays computed facts (harness.report.facts) out as one list of blocks
(harness.report.document) and writes it twice, as Markdown beside PNG files and as
HTML with every figure embedded; summary.json carries the same numbers for machines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.document import IMAGES_DIR, Block, Heading, Image, flatten, to_html, to_markdown
from harness.report.facts import ReportFacts
from harness.report.gpu import gpu_section
from harness.report.prediction import prediction_blocks
from harness.report.published import model_card_section, published_section
from harness.report.sections import (
    acceptance_section,
    caveats_section,
    gap_section,
    latency_section,
    occupancy_section,
    overview_section,
    seed_section,
    step_cost_section,
)
from harness.report.summary import summary


@dataclass(frozen=True)
class ReportPaths:
    """Everything render_report wrote."""

    markdown: Path
    html: Path
    summary: Path
    images: tuple[Path, ...]


def render_report(
    facts: ReportFacts,
    out_dir: str | Path,
    *,
    lead: Sequence[Block] = (),
    details: Sequence[Block] = (),
    summary_extra: Mapping[str, Any] | None = None,
    headline_ratio: str = "",
) -> ReportPaths:
    """Write report.md (+ images/*.png), report.html and summary.json into `out_dir`.

    `lead` goes right under the title (the headline), `details` after the overview;
    `summary_extra` is merged into summary.json; `headline_ratio` names the headline's
    ratio estimator where it differs from the gap table's.
    """
    extras = facts.extras
    blocks = [
        Heading(extras.title, 1),
        *lead,
        *overview_section(facts.metadata),
        *details,
        *gap_section(facts.gap_table, headline_ratio),
        *acceptance_section(facts.findings),
        *occupancy_section(facts.occupancy),
        *latency_section(facts),
        *gpu_section(facts.ordered),
        *seed_section(facts),
        *published_section(facts),
        *(prediction_blocks(facts.paper_predictions) if facts.paper_predictions else ()),
        *model_card_section(facts),
        *step_cost_section(extras.step_costs),
        *caveats_section(extras.caveats),
    ]
    out = Path(out_dir)
    markdown, page, images = write_blocks(blocks, out, extras.title, "report")
    paths = ReportPaths(markdown, page, out / "summary.json", images)
    content = summary(facts, summary_extra)
    paths.summary.write_text(json.dumps(content, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return paths


def write_blocks(blocks: Sequence[Block], out: Path, title: str, stem: str) -> tuple[Path, Path, tuple[Path, ...]]:
    """Write `blocks` as <stem>.md (+ images/*.png) and a self-contained <stem>.html in `out`.

    Returns (markdown path, html path, image paths).
    """
    (out / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    images = []
    for block in flatten(blocks):
        if isinstance(block, Image):
            path = out / IMAGES_DIR / f"{block.name}.png"
            path.write_bytes(block.png)
            images.append(path)
    markdown, page = out / f"{stem}.md", out / f"{stem}.html"
    markdown.write_text(to_markdown(blocks), encoding="utf-8")
    page.write_text(to_html(blocks, title), encoding="utf-8")
    return markdown, page, tuple(images)
