"""Crash-safe recording of a run: JSON lines while it goes, parquet at the end.

Rows are appended to `records.jsonl` / `tokens.jsonl` and flushed to disk at least
every `flush_interval_s` (on the next `add`, or by the runner's periodic `flush`), so
a crash loses only the requests still in flight.
`finalize()` converts the journals to the parquet tables of harness.rundir.records and
removes them. A distributed run's workers hand their flushed lines to a `sink` instead
(harness.driver.distributed.worker sends them to the master); the master appends each worker's lines
to journals of its own (`append_lines`) and merges them all at the end (`finalize`'s
`sources`), into the same two tables a single-process run writes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from harness.rundir.journal import JournalFiles, journal_tables
from harness.rundir.records import RECORDS_FILE, TOKENS_FILE

# Receives each flush's record lines and token lines (one line per request in both).
Sink = Callable[[list[str], list[str]], None]


class RunJournal:
    """Buffers rows in memory and appends them to the journals (or hands them to `sink`) on `flush()`."""

    def __init__(self, run_dir: Path | None, flush_interval_s: float = 1.0, sink: Sink | None = None) -> None:
        """`run_dir`: where the journals and tables go; None for a worker, whose `sink` sends its rows away."""
        if run_dir is None and sink is None:
            raise ValueError("a journal without a run directory needs a sink")
        self.run_dir = run_dir
        self.flush_interval_s = flush_interval_s
        self._records: list[str] = []
        self._tokens: list[str] = []
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.files = JournalFiles.in_dir(run_dir) if run_dir is not None else None
        self._sink = sink or self._append
        # Request ids with a row, so the runner can answer for the rest.
        self.recorded: set[int] = set()

    def add(self, record: dict[str, Any], token_times: list[float]) -> None:
        """Record one finished request and its per-token arrival times."""
        with self._lock:
            self.recorded.add(record["request_id"])
            self._records.append(json.dumps(record))
            self._tokens.append(json.dumps({"request_id": record["request_id"], "t": token_times}))
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Append buffered rows to the journals and fsync-free flush them to the OS."""
        with self._lock:
            records, self._records = self._records, []
            tokens, self._tokens = self._tokens, []
            self._last_flush = time.monotonic()
        if not records:
            return
        self._sink(records, tokens)

    def _append(self, records: list[str], tokens: list[str]) -> None:
        assert self.files is not None, "a journal of a run directory"
        append_lines(self.files, records, tokens)

    def finalize(self, sources: Sequence[JournalFiles] = ()) -> tuple[int, int]:
        """Write records.parquet and tokens.parquet from the journals; return row counts.

        `sources`: other processes' journals (a distributed run's workers), merged in and
        removed too.
        """
        assert self.run_dir is not None and self.files is not None, "only a run directory's journal is finalized"
        self.flush()
        journals = [self.files, *sources]
        records, tokens = journal_tables(journals)
        pq.write_table(records, self.run_dir / RECORDS_FILE)
        pq.write_table(tokens, self.run_dir / TOKENS_FILE)
        for files in journals:
            files.records.unlink(missing_ok=True)
            files.tokens.unlink(missing_ok=True)
        return records.num_rows, tokens.num_rows


def append_lines(files: JournalFiles, records: list[str], tokens: list[str]) -> None:
    """Append one flush's lines to a process's journals."""
    for path, lines in ((files.records, records), (files.tokens, tokens)):
        with path.open("a") as handle:
            handle.writelines(line + "\n" for line in lines)
