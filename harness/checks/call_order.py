"""Which call order the engine really ran, read from its step log: synchronous, or a batch queue.

With async scheduling vLLM's engine core schedules step N+1 before step N's output is
back, so in the step log a step's start `t_s` precedes the previous step's `end_s`;
synchronously, every step starts after the previous one ended. A GPU run is meant to
run the batch queue (launchers.server turns async scheduling on there), and this says
whether it did, from the engine's own times rather than from the flags it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

# Under a batch queue nearly every step overlaps the one before (a step that starts the
# engine after an idle spell does not): most of them is the sign of the queue.
BATCH_QUEUE_SHARE = 0.5


@dataclass(frozen=True)
class CallOrder:
    """Consecutive step pairs seen, and how many overlapped."""

    pairs: int
    overlapping: int

    @property
    def share(self) -> float:
        return self.overlapping / self.pairs if self.pairs else 0.0

    @property
    def batch_queue(self) -> bool:
        """True when the engine ran the batch-queue loop (async scheduling or pipeline parallelism)."""
        return self.share >= BATCH_QUEUE_SHARE


def call_order(steps_tables: Sequence[pd.DataFrame]) -> CallOrder:
    """Overlapping consecutive steps over every table (each one run's steps.parquet)."""
    pairs = overlapping = 0
    for steps in steps_tables:
        ordered = steps.sort_values("t_s")
        starts, ends = ordered["t_s"].to_numpy()[1:], ordered["end_s"].to_numpy()[:-1]
        pairs += len(starts)
        overlapping += int((starts < ends).sum())
    return CallOrder(pairs, overlapping)
