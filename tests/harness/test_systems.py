"""The system names, the server modes and the map between them agree."""

from __future__ import annotations

from typing import get_args

from harness.systems import MODES, SERVER_MODE, SYSTEMS, Mode, SystemName, modes_for


def test_the_literal_types_list_what_the_map_holds():
    assert SYSTEMS == get_args(SystemName) == ("continuous", "static", "naive")
    assert MODES == get_args(Mode) == ("continuous", "static")
    assert set(SERVER_MODE.values()) == set(MODES)


def test_naive_runs_on_the_continuous_server():
    assert SERVER_MODE["naive"] == "continuous"
    assert modes_for(["naive"]) == ["continuous"]
    assert modes_for(["static", "naive", "continuous"]) == ["continuous", "static"]
    assert modes_for(["static"]) == ["static"]
