"""The journal keeps rows across a crash and converts to the documented schema."""

from __future__ import annotations

import math

import pyarrow.parquet as pq

from harness.driver.journal import RunJournal
from harness.rundir.journal import read_journal
from harness.rundir.records import RECORD_SCHEMA, TOKEN_SCHEMA


def record(request_id: int, **overrides):
    row = {
        "request_id": request_id, "worker": "h:1", "planned_prompt_tokens": 8, "planned_output_tokens": 3,
        "requested_output_tokens": 3, "wave": -1, "scheduled_s": math.nan, "sent_s": 10.0, "lateness_s": math.nan,
        "first_token_s": 10.1, "end_s": 10.3, "prompt_tokens": 8, "completion_tokens": 3, "status": 200,
        "error": "", "ok": True, "length_mismatch": False,
    }
    return {**row, **overrides}


def test_rows_reach_disk_within_the_flush_interval(tmp_path):
    journal = RunJournal(tmp_path, flush_interval_s=0.0)
    journal.add(record(0), [10.1, 10.2, 10.3])
    # No finalize: a crash now would keep this request.
    assert [row["request_id"] for row in read_journal(journal.files.records)] == [0]


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"request_id": 0}\n{"request_id": 1, "wor')
    assert read_journal(path) == [{"request_id": 0}]


def test_finalize_writes_the_documented_schema_sorted_and_expands_tokens(tmp_path):
    journal = RunJournal(tmp_path, flush_interval_s=60)
    journal.add(record(1), [20.0, 20.5, 20.5])
    journal.add(record(0, ok=False, status=0, error="no response", completion_tokens=-1, first_token_s=math.nan), [])
    assert journal.finalize() == (2, 3)
    records = pq.read_table(tmp_path / "records.parquet")
    tokens = pq.read_table(tmp_path / "tokens.parquet")
    assert records.schema.equals(RECORD_SCHEMA, check_metadata=False)
    assert tokens.schema.equals(TOKEN_SCHEMA, check_metadata=False)
    assert records.column("request_id").to_pylist() == [0, 1]
    assert tokens.to_pydict() == {"request_id": [1, 1, 1], "token_index": [0, 1, 2], "t_s": [20.0, 20.5, 20.5]}
    assert not journal.files.records.exists() and not journal.files.tokens.exists()


def test_flush_writes_buffered_rows_and_nothing_when_there_are_none(tmp_path):
    journal = RunJournal(tmp_path, flush_interval_s=60)
    journal.flush()
    assert not journal.files.records.exists()
    journal.add(record(0), [10.1, 10.2, 10.3])
    assert read_journal(journal.files.records) == []  # buffered: the interval has not passed
    journal.flush()
    assert [row["request_id"] for row in read_journal(journal.files.records)] == [0]
