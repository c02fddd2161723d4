"""The batching systems the harness measures and predicts: the one list of their names.

- continuous: vLLM's own scheduler;
- static: the same server with the static-batching scheduler plugin;
- naive: padded waves of B requests sent by the client to the continuous server.
"""

from __future__ import annotations

from typing import Literal, get_args

SystemName = Literal["continuous", "static", "naive"]
SYSTEMS: tuple[SystemName, ...] = get_args(SystemName)
