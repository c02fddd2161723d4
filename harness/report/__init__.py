"""The report of a sweep: report.md, a self-contained report.html, and summary.json.

`assemble` goes from run directories (or measured runs) to the written report:
`facts` computes everything the report states, `sections`, `published`, `causes`
(why the gap is its size) and `headline` lay it out as blocks of a `document`
(numbers written by `format`, figures drawn by `plots`), and `render` writes the
files, with `summary`'s JSON.
"""

from harness.report.assemble import AssembledReport, assemble_report, write_report
from harness.report.facts import ReportExtras, ReportFacts, ReportRun, gather_facts
from harness.report.render import ReportPaths, render_report

__all__ = [
    "AssembledReport",
    "ReportExtras",
    "ReportFacts",
    "ReportPaths",
    "ReportRun",
    "assemble_report",
    "gather_facts",
    "render_report",
    "write_report",
]
