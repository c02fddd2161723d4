"""A candidate or a pinned baseline on disk, as history rows: the repetitions the gate compares.

A result directory is a run, a sweep's runs/ directory, or a reproduce or nightly
directory holding runs/. Its runs are assessed together, as the report assesses them
(harness.analysis.assess), so the gate compares the figures the report shows.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis.assess import assess_run_dirs
from harness.history.from_run import repetition_from_run
from harness.history.rows import RepetitionRow, Source
from harness.rundir.reader import find_run_dirs


def repetitions_from_dir(path: Path, source: Source = "run", gpu: str | None = None) -> list[RepetitionRow]:
    """Every run under `path` as a repetition; the invocation is the directory's name.

    Runs with failed or missing requests are kept (the gate calls them inconclusive,
    it does not refuse them); anything that is not a run is a UsageError.
    """
    assessment = assess_run_dirs(find_run_dirs([path]), allow_partial=True)
    invocation_id = path.resolve().name
    return [repetition_from_run(run, source=source, invocation_id=invocation_id, accepted=False, gpu=gpu)
            for run in assessment.assessed]
