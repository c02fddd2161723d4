"""Make a finished `./reproduce` the committed reference: reports/reference-cpu and the packaged figures.

    .venv/bin/python benchmarks/write_reference.py reports/<date>-<host>

Writes reports/reference-cpu from the job's runs as the job writes its final report (the
same `assemble_report`, caveats and run order), then harness/reference/reference.json from
its summary.json, then the report once more: now the packaged reference is its own, so it
says its runs are the reference's instead of setting them beside the one it replaces.
Run it from the checkout, with the job's directory inside it, so the report's run paths
stay relative.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.jobs.reproduce import CAVEATS
from harness.reference import REFERENCE_REPORT
from harness.report.assemble import assemble_report


def write(runs: list[Path], out: Path) -> None:
    """The job's final report of `runs` into `out`, against the packaged figures as they are on disk now."""
    shutil.rmtree(out, ignore_errors=True)
    assemble_report(runs, out, caveats=list(CAVEATS), allow_partial=True)


def main() -> int:
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "runs").is_dir():
        sys.exit("usage: benchmarks/write_reference.py REPORT_DIR (a finished ./reproduce, with its runs/)")
    runs = sorted((Path(sys.argv[1]) / "runs").iterdir(),
                  key=lambda run: json.loads((run / "manifest.json").read_text())["started_at"])
    out = Path(REFERENCE_REPORT)
    write(runs, out)
    subprocess.run([sys.executable, "-m", "harness.reference"], check=True)
    write(runs, out)
    print(out / "report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
