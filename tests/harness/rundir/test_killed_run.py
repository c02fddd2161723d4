"""A run killed before it wrote its tables is read from the journals it left (harness.rundir.reader)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.errors import UsageError
from harness.rundir.reader import load_run

FIXTURE = Path(__file__).with_name("fixtures") / "format-1-static"


def killed_copy(tmp_path: Path, rows: list[int], workers: bool = False) -> Path:
    """The fixture run as a SIGKILL leaves it: the manifest and plan, journals of `rows`, no tables."""
    run = tmp_path / "killed"
    shutil.copytree(FIXTURE, run)
    records = pq.read_table(run / "records.parquet").to_pandas().set_index("request_id")
    tokens = pq.read_table(run / "tokens.parquet").to_pandas()
    for name in ("records.parquet", "tokens.parquet", "telemetry.parquet", "steps.parquet"):
        (run / name).unlink(missing_ok=True)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(complete=False, ended_at=None, engine_steps=False)
    (run / "manifest.json").write_text(json.dumps(manifest))
    for k, request_id in enumerate(rows):
        suffix = f"-w{k % 2}" if workers else ""
        row = {"request_id": request_id, **records.loc[request_id].to_dict()}
        times = tokens.loc[tokens["request_id"] == request_id].sort_values("token_index")["t_s"].tolist()
        with (run / f"records{suffix}.jsonl").open("a") as handle:
            handle.write(json.dumps(row, default=float) + "\n")
        with (run / f"tokens{suffix}.jsonl").open("a") as handle:
            handle.write(json.dumps({"request_id": request_id, "t": times}) + "\n")
    with (run / "records.jsonl").open("a") as handle:
        handle.write('{"request_id": 11, "wor')  # torn mid-write by the kill
    return run


@pytest.mark.parametrize("workers", [False, True])
def test_a_killed_run_is_refused_naming_what_is_missing_and_read_whole_when_allowed(tmp_path, workers):
    run = killed_copy(tmp_path, [0, 1, 2, 4], workers)
    with pytest.raises(UsageError) as refused:
        load_run(run)
    assert str(refused.value) == (
        f"{run}: killed before it wrote its tables (4 rows read from its journals); run did not finish (manifest.json"
        " says complete: false); 8 planned requests have no row (ids 3, 5, 6, 7, 8, ...) (--allow-partial to analyse"
        " it anyway)")
    data = load_run(run, allow_partial=True)
    assert data.records["request_id"].tolist() == [0, 1, 2, 4] and data.records["ok"].all()
    assert sorted(data.tokens["request_id"].unique()) == [0, 1, 2, 4]
    assert data.telemetry.empty and data.steps is None
