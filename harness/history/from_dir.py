"""A candidate or a pinned baseline on disk, as history rows: the trials the gate compares.

A result directory is a run, a sweep's runs/ directory, or a reproduce or nightly
directory holding runs/. Its runs are assessed together, as the report assesses them
(harness.analysis.assess), so the gate compares the figures the report shows.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis.assess import assess_run_dirs
from harness.history.from_run import trial_from_run
from harness.history.rows import Source, TrialRow
from harness.rundir.reader import find_run_dirs


def trials_from_dir(path: Path, source: Source = "run", gpu: str | None = None) -> list[TrialRow]:
    """Every run under `path` as a trial; the batch is the directory's name.

    Runs with failed or missing requests are kept (the gate calls them inconclusive,
    it does not refuse them); anything that is not a run is a UsageError.
    """
    assessment = assess_run_dirs(find_run_dirs([path]), allow_partial=True)
    batch = path.resolve().name
    return [trial_from_run(run, source=source, batch_id=batch, accepted=False, gpu=gpu) for run in assessment.assessed]
