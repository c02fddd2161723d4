"""The batching systems the harness measures and predicts, and the server each runs on.

- continuous: vLLM's own scheduler;
- static: the same server with the static-batching scheduler plugin;
- naive: padded waves of B requests sent by the client to the continuous server.

A server mode is a system with a scheduler of its own; `SERVER_MODE` is the one
statement of which server each system needs, and the names below derive from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

# The Literal types are what mypy checks, the map is what the code reads; tests/harness/test_systems.py
# keeps them in agreement.
SystemName = Literal["continuous", "static", "naive"]
# The systems a launched server can be started as (launchers.ServerSpec.mode).
Mode = Literal["continuous", "static"]

SERVER_MODE: dict[SystemName, Mode] = {"continuous": "continuous", "static": "static", "naive": "continuous"}
SYSTEMS: tuple[SystemName, ...] = tuple(SERVER_MODE)
MODES: tuple[Mode, ...] = tuple(dict.fromkeys(SERVER_MODE.values()))


def modes_for(systems: Iterable[SystemName]) -> list[Mode]:
    """The server modes `systems` run on, each once, in `MODES` order."""
    needed = {SERVER_MODE[system] for system in systems}
    return [mode for mode in MODES if mode in needed]
