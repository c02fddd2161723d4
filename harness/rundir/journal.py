"""The journals a run appends while it goes (`records.jsonl`, `tokens.jsonl`), and their tables.

A run writes one JSON line per finished request to each journal (harness.driver.journal)
and turns them into records.parquet and tokens.parquet when it ends. A run killed before
that (SIGKILL, a power cut) leaves only the journals: they are read here, by the writer
at its end and by the reader of such a run (harness.rundir.reader), into the same tables.
A torn last line (a crash mid-write) is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.rundir.records import RECORD_SCHEMA, TOKEN_SCHEMA

RECORDS_JOURNAL = "records.jsonl"
TOKENS_JOURNAL = "tokens.jsonl"


@dataclass(frozen=True)
class JournalFiles:
    """The two JSON-lines journals of one recording process."""

    records: Path
    tokens: Path

    @classmethod
    def in_dir(cls, directory: Path) -> JournalFiles:
        """The journals of the process that records into `directory`."""
        return cls(directory / RECORDS_JOURNAL, directory / TOKENS_JOURNAL)

    @classmethod
    def of_worker(cls, directory: Path, worker: int) -> JournalFiles:
        """The journals a distributed run's master keeps for load worker `worker` in `directory`."""
        return cls(directory / f"records-w{worker}.jsonl", directory / f"tokens-w{worker}.jsonl")

    @classmethod
    def all_in(cls, directory: Path) -> list[JournalFiles]:
        """Every journal pair left in `directory`: its own, and a distributed run's workers'."""
        return [cls(path, path.with_name("tokens" + path.name.removeprefix("records")))
                for path in sorted(directory.glob("records*.jsonl"))]


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines journal; a torn last line (crash mid-write) is skipped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def journal_tables(journals: Sequence[JournalFiles]) -> tuple[pa.Table, pa.Table]:
    """The records and tokens tables of `journals` together, records by request_id."""
    records = [row for files in journals for row in read_journal(files.records)]
    token_rows: dict[str, list[Any]] = {"request_id": [], "token_index": [], "t_s": []}
    for entry in (entry for files in journals for entry in read_journal(files.tokens)):
        times = entry["t"]
        token_rows["request_id"] += [entry["request_id"]] * len(times)
        token_rows["token_index"] += list(range(len(times)))
        token_rows["t_s"] += times
    records.sort(key=lambda row: row["request_id"])
    return pa.Table.from_pylist(records, schema=RECORD_SCHEMA), pa.table(token_rows, schema=TOKEN_SCHEMA)
