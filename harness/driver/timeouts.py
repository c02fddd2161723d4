"""How long the driver waits on a server: light enough for the CLI to import for its help."""

from __future__ import annotations

# No byte for this long fails a request as stalled. A request waiting in the server's
# queue gets no byte either, so a run whose requests queue longer needs a larger value.
DEFAULT_STALL_TIMEOUT_S = 120.0
# Connecting is quick on a live server; a slow connect is a dead or overloaded one.
CONNECT_TIMEOUT_S = 30.0
