"""The history store's SQLite schema (version 4), its upgrades, and RepetitionRow to and from its columns.

One table, `repetitions`, one row per RepetitionRow plus its two derived keys. Timestamps are
stored as fixed-width ISO 8601 UTC text ('YYYY-MM-DDTHH:MM:SS.ffffffZ'), so text order
is time order; booleans as 0/1; health reasons as a JSON list. The schema's version is
SQLite's `PRAGMA user_version`: 0 means a new file, to be created.

Version 1 named the table `trials` and the column `invocation_id` `batch_id`; UPGRADES
renames them in place, keeping every row. Version 2 had no `arrival` (its rows read "unknown")
and no `e2e_p50_at_one_speed_s` (NULL). Version 3 had no `measurement_version` (its rows read
1) and no `server_args` (''), and hashed the harness version into `config_key`: its keys are
recomputed under today's CONFIG_FIELDS (rekey).
"""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from harness.history.rows import CONFIG_FIELDS, HARDWARE_FIELDS, RepetitionRow, hash_key, server_label

SCHEMA_VERSION = 4
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

CREATE_STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS repetitions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        config_key TEXT NOT NULL,
        hardware_key TEXT NOT NULL,
        model TEXT NOT NULL,
        system TEXT NOT NULL,
        batch_size INTEGER NOT NULL,
        workload TEXT NOT NULL,
        arrival TEXT NOT NULL DEFAULT 'unknown',
        plan_sha256 TEXT NOT NULL,
        measurement_version INTEGER NOT NULL DEFAULT 1,
        harness_version TEXT NOT NULL,
        cpu TEXT NOT NULL,
        cores INTEGER NOT NULL,
        gpu TEXT NOT NULL,
        server_name TEXT NOT NULL,
        server_version TEXT NOT NULL,
        server_args TEXT NOT NULL DEFAULT '',
        git_sha TEXT,
        recorded_at TEXT NOT NULL,
        source TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        accepted INTEGER NOT NULL,
        run_dir TEXT NOT NULL,
        output_tok_s REAL,
        total_tok_s REAL,
        req_s REAL,
        ttft_p50_s REAL,
        ttft_p90_s REAL,
        ttft_p99_s REAL,
        tpot_p50_s REAL,
        tpot_p90_s REAL,
        tpot_p99_s REAL,
        e2e_p50_s REAL,
        e2e_p90_s REAL,
        e2e_p99_s REAL,
        engine_total_tok_s REAL,
        e2e_p50_at_one_speed_s REAL,
        errors INTEGER NOT NULL,
        stable INTEGER NOT NULL,
        health_reasons TEXT NOT NULL
    )""",
    # The baseline query: one configuration's accepted repetitions, newest last.
    "CREATE INDEX IF NOT EXISTS repetitions_by_config ON repetitions (config_key, accepted, recorded_at)",
    "CREATE INDEX IF NOT EXISTS repetitions_by_invocation ON repetitions (invocation_id)",
)

COLUMNS: tuple[str, ...] = ("config_key", "hardware_key", *RepetitionRow.model_fields)
# The figures a baseline can be taken of: every nullable number of a repetition.
METRICS = (
    "output_tok_s", "total_tok_s", "req_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s",
    "tpot_p99_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "engine_total_tok_s", "e2e_p50_at_one_speed_s",
)
BOOLEAN_COLUMNS = ("accepted", "stable")
# The statements that take a file from version N (the key) to N + 1. Old indexes are
# dropped, and CREATE_STATEMENTS, run after them, creates them under their new names.
UPGRADES: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE trials RENAME TO repetitions",
        "ALTER TABLE repetitions RENAME COLUMN batch_id TO invocation_id",
        "DROP INDEX trials_by_config",
        "DROP INDEX trials_by_batch",
    ),
    2: (
        "ALTER TABLE repetitions ADD COLUMN arrival TEXT NOT NULL DEFAULT 'unknown'",
        "ALTER TABLE repetitions ADD COLUMN e2e_p50_at_one_speed_s REAL",
    ),
    # Rows of before measured the way measurement version 1 does.
    3: (
        "ALTER TABLE repetitions ADD COLUMN measurement_version INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE repetitions ADD COLUMN server_args TEXT NOT NULL DEFAULT ''",
    ),
}
# The versions whose upgrade changes what the keys hash: a file upgraded from any of them has its
# keys recomputed (rekey) once its columns are today's, so every step's columns exist by then.
REKEYING_UPGRADES = frozenset({3})
INSERT = f"INSERT INTO repetitions ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


def to_time_text(moment: datetime) -> str:
    """An aware datetime in UTC as the store writes it (fixed width: text order is time order)."""
    if moment.tzinfo is None:
        raise ValueError(f"timestamps must be timezone-aware, got {moment}")
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def row_values(row: RepetitionRow) -> tuple[Any, ...]:
    """The INSERT parameters of one row, in COLUMNS order."""
    values: list[Any] = [row.config_key, row.hardware_key]
    for name in RepetitionRow.model_fields:
        value = getattr(row, name)
        if isinstance(value, datetime):
            value = to_time_text(value)
        elif isinstance(value, tuple):
            value = json.dumps(list(value))
        values.append(value)
    return tuple(values)


def rekey(connection: sqlite3.Connection) -> int:
    """Recompute every stored row's `config_key` and `hardware_key` from its columns; how many rows changed."""
    fields = (*CONFIG_FIELDS, *HARDWARE_FIELDS)
    changed = []
    for row_id, config_key, hardware_key, *values in connection.execute(
            f"SELECT id, config_key, hardware_key, {', '.join(fields)} FROM repetitions"):
        keys = (hash_key(values[:len(CONFIG_FIELDS)]), hash_key(values[len(CONFIG_FIELDS):]))
        if keys != (config_key, hardware_key):
            changed.append((*keys, row_id))
    connection.executemany("UPDATE repetitions SET config_key = ?, hardware_key = ? WHERE id = ?", changed)
    return len(changed)


def server_labels(frame: pd.DataFrame) -> pd.Series:
    """Each repetition's server build (RepetitionRow.server) of a store's frame, on the frame's index."""
    columns = zip(frame["server_name"], frame["server_version"], frame["server_args"], strict=True)
    return pd.Series([server_label(*build) for build in columns], index=frame.index, dtype=object)


def decode_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns as read back into Python's types: UTC timestamps, booleans, reasons as tuples."""
    frame["recorded_at"] = pd.to_datetime(frame["recorded_at"], format=TIME_FORMAT, utc=True)
    for name in BOOLEAN_COLUMNS:
        frame[name] = frame[name].astype(bool)
    frame["health_reasons"] = [tuple(json.loads(text)) for text in frame["health_reasons"]]
    for name in METRICS:
        # A column whose every value is NULL comes back as object; keep it numeric.
        frame[name] = frame[name].astype("float64")
    return frame


def frame_rows(frame: pd.DataFrame) -> list[RepetitionRow]:
    """A decoded frame's records as RepetitionRows: pandas' NaN and Timestamp back to None and datetime."""
    rows = []
    for record in frame[list(RepetitionRow.model_fields)].to_dict("records"):
        fields = {str(name): (None if isinstance(value, float) and math.isnan(value) else value)
                  for name, value in record.items()}
        fields["recorded_at"] = pd.Timestamp(record["recorded_at"]).to_pydatetime()
        rows.append(RepetitionRow.model_validate(fields))
    return rows
