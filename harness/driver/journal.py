"""Crash-safe recording of a run: JSON lines while it goes, parquet at the end.

Rows are appended to `records.jsonl` / `tokens.jsonl` and flushed to disk at least
every `flush_interval_s` (on the next `add`, or by the runner's periodic `flush`), so
a crash loses only the requests still in flight.
`finalize()` converts the journals to the parquet tables of harness.records and
removes them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.records import RECORD_SCHEMA, RECORDS_FILE, TOKEN_SCHEMA, TOKENS_FILE

RECORDS_JOURNAL = "records.jsonl"
TOKENS_JOURNAL = "tokens.jsonl"


class RunJournal:
    """Buffers rows in memory and appends them to the journals on `flush()`."""

    def __init__(self, run_dir: Path, flush_interval_s: float = 1.0) -> None:
        self.run_dir = run_dir
        self.flush_interval_s = flush_interval_s
        self._records: list[str] = []
        self._tokens: list[str] = []
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.records_path = run_dir / RECORDS_JOURNAL
        self.tokens_path = run_dir / TOKENS_JOURNAL
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
        for path, lines in ((self.records_path, records), (self.tokens_path, tokens)):
            with path.open("a") as handle:
                handle.writelines(line + "\n" for line in lines)

    def finalize(self) -> tuple[int, int]:
        """Write records.parquet and tokens.parquet from the journals; return row counts."""
        self.flush()
        records = read_journal(self.records_path)
        token_rows: dict[str, list[Any]] = {"request_id": [], "token_index": [], "t_s": []}
        for entry in read_journal(self.tokens_path):
            times = entry["t"]
            token_rows["request_id"] += [entry["request_id"]] * len(times)
            token_rows["token_index"] += list(range(len(times)))
            token_rows["t_s"] += times
        records.sort(key=lambda row: row["request_id"])
        pq.write_table(pa.Table.from_pylist(records, schema=RECORD_SCHEMA), self.run_dir / RECORDS_FILE)
        pq.write_table(pa.table(token_rows, schema=TOKEN_SCHEMA), self.run_dir / TOKENS_FILE)
        self.records_path.unlink(missing_ok=True)
        self.tokens_path.unlink(missing_ok=True)
        return len(records), len(token_rows["t_s"])


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
