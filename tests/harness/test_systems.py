"""The system names, the server modes and the map between them agree."""

from __future__ import annotations

from typing import get_args

from harness.systems import (
    CLIENT_SYSTEMS,
    HF_SYSTEMS,
    MODES,
    SERVER_MODE,
    SERVER_MODES,
    SYSTEMS,
    HfMode,
    Mode,
    ServerMode,
    SystemName,
    modes_for,
)
from launchers.kinds import KINDS, kind_of, launch_help


def test_the_literal_types_list_what_the_maps_hold():
    assert SYSTEMS == ("continuous", "static", "naive")
    assert HF_SYSTEMS == ("hf-continuous", "hf-sequential")
    assert CLIENT_SYSTEMS == ("client-static",)
    assert SYSTEMS + CLIENT_SYSTEMS + HF_SYSTEMS == get_args(SystemName) == tuple(SERVER_MODE)
    assert MODES == get_args(Mode) == ("continuous", "static")
    assert get_args(HfMode) == ("hf-continuous", "hf-sequential")
    assert get_args(Mode) + get_args(HfMode) == SERVER_MODES
    assert tuple(mode for kind in get_args(ServerMode) for mode in get_args(kind)) == SERVER_MODES
    assert set(SERVER_MODE.values()) == set(SERVER_MODES)


def test_naive_runs_on_the_continuous_server():
    assert SERVER_MODE["naive"] == SERVER_MODE["client-static"] == "continuous"
    assert modes_for(["naive"]) == ["continuous"]
    assert modes_for(["static", "naive", "continuous"]) == ["continuous", "static"]
    assert modes_for(["static"]) == ["static"]


def test_each_transformers_system_is_its_own_server_mode():
    assert all(SERVER_MODE[system] == system for system in HF_SYSTEMS)
    assert modes_for(["hf-sequential", "naive"]) == ["continuous", "hf-sequential"]


def test_every_server_mode_is_started_by_exactly_one_kind():
    started = [mode for kind in KINDS.values() for mode in kind.modes]
    assert sorted(started) == sorted(SERVER_MODES)
    assert kind_of("static").name == "vllm" and kind_of("static").records_steps
    assert kind_of("hf-continuous").name == "transformers" and not kind_of("hf-continuous").records_steps
    assert launch_help() == "vLLM continuous, static; `transformers serve` hf-continuous, hf-sequential"
