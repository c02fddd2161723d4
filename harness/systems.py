"""The batching systems the harness measures and predicts, and the server each runs on.

vLLM's three, the reproduction's systems (`SYSTEMS`):
- continuous: vLLM's own scheduler;
- static: the same server with the static-batching scheduler plugin;
- naive: padded waves of B requests sent by the client to the continuous server.

Static batching from the client, for any server (`CLIENT_SYSTEMS`):
- client-static: unpadded waves of B sent by the client, each once the previous one has
  ended and B requests have arrived or the oldest has waited the batch wait: the engine's
  static rule (launchers.engine.static_scheduler), kept by the client, so a server with at
  least B slots runs the static schedule whatever its own scheduler is. On vLLM it runs on
  the continuous server.

Hugging Face's `transformers serve`, a second, independent server (`HF_SYSTEMS`):
- hf-continuous: its own continuous batching (paged attention, iteration-level scheduling);
- hf-sequential: one `generate()` at a time, no batching at all.

A server mode is a system with a scheduler of its own; `SERVER_MODE` is the one
statement of which server each system needs, and the names below derive from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

# The Literal types are what mypy checks, the maps are what the code reads; tests/harness/test_systems.py
# keeps them in agreement.
SystemName = Literal["continuous", "static", "naive", "client-static", "hf-continuous", "hf-sequential"]
# The modes a vLLM server can be started in (launchers.ServerSpec.mode).
Mode = Literal["continuous", "static"]
# The modes a `transformers serve` server can be started in (launchers.TransformersSpec.mode).
HfMode = Literal["hf-continuous", "hf-sequential"]
# Every server mode, of every kind of server (launchers.kinds says which kind starts which).
ServerMode = Mode | HfMode

VLLM_SERVER_MODE: dict[SystemName, Mode] = {"continuous": "continuous", "static": "static", "naive": "continuous"}
CLIENT_SERVER_MODE: dict[SystemName, Mode] = {"client-static": "continuous"}
HF_SERVER_MODE: dict[SystemName, HfMode] = {"hf-continuous": "hf-continuous", "hf-sequential": "hf-sequential"}
SERVER_MODE: dict[SystemName, ServerMode] = {**VLLM_SERVER_MODE, **CLIENT_SERVER_MODE, **HF_SERVER_MODE}
SYSTEMS: tuple[SystemName, ...] = tuple(VLLM_SERVER_MODE)
CLIENT_SYSTEMS: tuple[SystemName, ...] = tuple(CLIENT_SERVER_MODE)
# The systems the client sends in waves (a wave goes once the previous one has ended).
WAVE_SYSTEMS: tuple[SystemName, ...] = ("naive", "client-static")
HF_SYSTEMS: tuple[SystemName, ...] = tuple(HF_SERVER_MODE)
# Every system, in the order tables, plots and lists show them.
ALL_SYSTEMS: tuple[SystemName, ...] = tuple(SERVER_MODE)
MODES: tuple[Mode, ...] = tuple(dict.fromkeys(VLLM_SERVER_MODE.values()))
SERVER_MODES: tuple[ServerMode, ...] = tuple(dict.fromkeys(SERVER_MODE.values()))


def system_pair(ratio: str) -> tuple[SystemName, SystemName] | None:
    """The two systems of a ratio's name ("continuous/static"); None if either is not a system."""
    top, _, bottom = ratio.partition("/")
    by_name = {system: system for system in ALL_SYSTEMS}
    if top not in by_name or bottom not in by_name:
        return None
    return by_name[top], by_name[bottom]


def shown_systems(measured: Iterable[str]) -> tuple[SystemName, ...]:
    """The systems a table shows: vLLM's three always, any other where it was measured."""
    present = set(measured)
    return tuple(system for system in ALL_SYSTEMS if system in SYSTEMS or system in present)


def modes_for(systems: Iterable[SystemName]) -> list[ServerMode]:
    """The server modes `systems` run on, each once, in `SERVER_MODES` order."""
    needed = {SERVER_MODE[system] for system in systems}
    return [mode for mode in SERVER_MODES if mode in needed]

# Arrival kinds (harness.workload.spec) whose requests are sent at planned times whatever the server does.
OPEN_LOOP_ARRIVALS = ("poisson", "trace")
