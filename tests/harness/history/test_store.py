"""The SQLite store in one process: round trip, filters, schema, refusals, default location (upgrades:
test_store_upgrade)."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from harness.errors import UsageError
from harness.history import HistoryStore, RepetitionRow
from harness.history.schema import COLUMNS, SCHEMA_VERSION


def test_round_trip_gives_back_every_field(tmp_path, make_repetition):
    store = HistoryStore(tmp_path / "h.sqlite")
    rows = [make_repetition(), make_repetition(system="static", git_sha=None, total_tok_s=None, stable=False,
                                          health_reasons=("client starved", "engine idle 30%"), accepted=False)]
    assert store.append(rows) == 2
    frame = store.frame()
    assert list(frame.columns) == list(COLUMNS)
    back = [RepetitionRow(**{name: record[name] for name in RepetitionRow.model_fields}) for record in _records(frame)]
    assert back == rows
    assert list(frame["config_key"]) == [row.config_key for row in rows]
    assert frame["recorded_at"].dt.tz is not None
    assert frame["stable"].dtype == bool


def _records(frame: pd.DataFrame) -> list[dict]:
    records = frame.to_dict("records")
    for record in records:
        record["recorded_at"] = record["recorded_at"].to_pydatetime()
        for name, value in record.items():
            if isinstance(value, float) and value != value:
                record[name] = None
    return records


def test_frame_filters_by_value_list_and_null(tmp_path, make_repetition):
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append([make_repetition(system="continuous"), make_repetition(system="static", git_sha=None),
                  make_repetition(system="naive", accepted=False)])
    assert list(store.frame(system="static")["system"]) == ["static"]
    assert sorted(store.frame(system=["naive", "static"])["system"]) == ["naive", "static"]
    assert list(store.frame(git_sha=None)["system"]) == ["static"]
    assert list(store.frame(accepted=False)["system"]) == ["naive"]
    assert len(store.frame(system="continuous", accepted=True)) == 1
    assert store.frame(system="nothing").empty


def test_frame_refuses_an_unknown_column(tmp_path):
    with pytest.raises(ValueError, match="no column 'colour'"):
        HistoryStore(tmp_path / "h.sqlite").frame(colour="red")


def test_an_empty_store_has_every_column(tmp_path):
    frame = HistoryStore(tmp_path / "h.sqlite").frame()
    assert frame.empty
    assert list(frame.columns) == list(COLUMNS)


def test_a_failing_append_adds_nothing(tmp_path, make_repetition):
    store = HistoryStore(tmp_path / "h.sqlite")
    with pytest.raises(TypeError, match="RepetitionRow"):
        store.append([make_repetition(), make_repetition(), {"model": "not a row"}])
    assert store.frame().empty


def test_opening_twice_keeps_the_rows_and_the_schema(tmp_path, make_repetition):
    path = tmp_path / "deep" / "er" / "h.sqlite"
    HistoryStore(path).append([make_repetition()])
    store = HistoryStore(path)
    assert len(store.frame()) == 1
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_file_that_is_not_a_database_is_a_usage_error(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are not the rows you are looking for\n" * 100)
    with pytest.raises(UsageError, match=f"{path}: file is not a database"):
        HistoryStore(path)


def test_a_directory_that_cannot_be_made_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create its directory"):
        HistoryStore(blocker / "h.sqlite")

