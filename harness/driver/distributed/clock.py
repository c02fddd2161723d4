"""How far a worker's clock is from its master's (pure).

A worker on another machine times its requests on its own clock. To send at the run's
planned offsets from the master's start instant, and to write rows that line up with the
master's telemetry, it needs the offset between the two clocks. Estimated as NTP does:
the worker notes when it asked (t1) and when the answer came (t4), the master notes its
time in between (m); if the trip was symmetric, the worker's clock read (t1 + t4) / 2 at
m. The exchange with the shortest round trip bounds the error best (by half its trip).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Exchanges a worker makes: the best of these bounds the error.
EXCHANGES = 8


@dataclass(frozen=True)
class Exchange:
    """One ping: worker sent at `asked_s`, master's clock read `master_s`, answer back at `answered_s`."""

    asked_s: float
    master_s: float
    answered_s: float

    @property
    def round_trip_s(self) -> float:
        return self.answered_s - self.asked_s


@dataclass(frozen=True)
class ClockOffset:
    """The worker's clock minus the master's, and the round trip it was measured over (its error is at most half)."""

    offset_s: float
    round_trip_s: float


def estimate_offset(exchanges: Sequence[Exchange]) -> ClockOffset:
    """The offset from the exchange with the shortest round trip."""
    if not exchanges:
        raise ValueError("no exchanges to estimate a clock offset from")
    best = min(exchanges, key=lambda exchange: exchange.round_trip_s)
    return ClockOffset((best.asked_s + best.answered_s) / 2 - best.master_s, best.round_trip_s)
