"""The report of a sweep: report.md, a self-contained report.html, and summary.json.

`plots` draws each figure to PNG bytes; `render` assembles the sections and writes
the three files.
"""

from harness.report.render import ReportExtras, ReportPaths, ReportRun, render_report

__all__ = ["ReportExtras", "ReportPaths", "ReportRun", "render_report"]
