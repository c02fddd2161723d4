"""Runs recorded before a records column existed still load, with what their rows meant."""

from __future__ import annotations

import pyarrow.parquet as pq

from harness.rundir.reader import load_run

ADDED = ["length_forced", "retokenized_completion_tokens", "length_exact"]


def test_a_run_without_the_length_columns_reads_as_forced_and_exact_where_ok(tmp_path, synthetic_runs):
    run_dir = synthetic_runs.write_run(
        tmp_path, "old", "continuous", synthetic_runs.cap_workload(4), synthetic_runs.OUTPUTS[4], 2
    )
    records = pq.read_table(run_dir / "records.parquet")
    ok = [True, False, True, True]
    old = records.drop_columns(ADDED).set_column(records.schema.get_field_index("ok"), "ok", [ok])
    pq.write_table(old, run_dir / "records.parquet")
    rows = load_run(run_dir, allow_partial=True).records
    assert rows["length_forced"].all() and (rows["retokenized_completion_tokens"] == -1).all()
    assert rows["length_exact"].tolist() == ok
