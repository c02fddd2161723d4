"""The system names, the server modes and the map between them agree."""

from __future__ import annotations

from typing import get_args

from harness.systems import (
    HF_MODES,
    HF_SYSTEMS,
    MODES,
    SERVER_MODE,
    SYSTEMS,
    HfMode,
    Mode,
    SystemName,
    modes_for,
)


def test_the_literal_types_list_what_the_maps_hold():
    assert SYSTEMS == ("continuous", "static", "naive")
    assert HF_SYSTEMS == ("hf-continuous", "hf-sequential")
    assert SYSTEMS + HF_SYSTEMS == get_args(SystemName) == tuple(SERVER_MODE)
    assert MODES == get_args(Mode) == ("continuous", "static")
    assert get_args(HfMode) == HF_MODES
    assert set(SERVER_MODE.values()) == set(MODES) | set(HF_MODES)


def test_naive_runs_on_the_continuous_server():
    assert SERVER_MODE["naive"] == "continuous"
    assert modes_for(["naive"]) == ["continuous"]
    assert modes_for(["static", "naive", "continuous"]) == ["continuous", "static"]
    assert modes_for(["static"]) == ["static"]


def test_each_transformers_system_is_its_own_server_mode():
    assert all(SERVER_MODE[system] == system for system in HF_SYSTEMS)
