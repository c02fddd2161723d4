"""How long the driver waits on a server: light enough for the CLI to import for its help."""

from __future__ import annotations

from dataclasses import dataclass

# Between two pieces of a stream that has begun: a live server sends a token at least
# every step, so this long without a byte is a stall.
DEFAULT_STALL_TIMEOUT_S = 120.0
# From sending to the first byte of the body. A request queued in the server receives
# nothing until it is admitted, and a burst of 1000 at B = 16 in static mode queues its
# last requests for tens of minutes on a GPU: this bound is for hung servers only.
DEFAULT_FIRST_BYTE_TIMEOUT_S = 3600.0
# Connecting is quick on a live server; a slow connect is a dead or overloaded one.
CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Timeouts:
    """A request fails as `stall` when either wait runs out."""

    first_byte_s: float = DEFAULT_FIRST_BYTE_TIMEOUT_S
    stall_s: float = DEFAULT_STALL_TIMEOUT_S
