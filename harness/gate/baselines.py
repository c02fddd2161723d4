"""Where a configuration's baseline sample comes from: a pinned result, or the history."""

from __future__ import annotations

from collections.abc import Sequence

from harness.gate.compare import BaselineSample, group_by_config
from harness.history.rows import TrialRow
from harness.history.store import HistoryStore

# A rolling baseline: the last this many accepted batches (nights) of a configuration.
BASELINE_BATCHES = 7


def from_directory(trials: Sequence[TrialRow], description: str) -> dict[str, BaselineSample]:
    """A pinned result as one night per configuration."""
    return {key: BaselineSample((tuple(rows),), description) for key, rows in group_by_config(trials).items()}


def from_history(
    store: HistoryStore,
    candidate: Sequence[TrialRow],
    last: int,
    pool_hardware: bool = False,
    pool_servers: bool = False,
) -> dict[str, BaselineSample]:
    """Each candidate configuration's last `last` accepted batches from the history.

    Only from the candidate's machine and server version unless pooled; only batches
    that ended before the candidate's first trial began, so it is never its own baseline.
    """
    samples = {}
    for key, rows in group_by_config(candidate).items():
        head = rows[0]
        found = store.baseline(
            key, last, hardware_key=head.hardware_key, server=head.server, pool_hardware=pool_hardware,
            pool_servers=pool_servers, before=min(row.recorded_at for row in rows),
        )
        if not found.batches:
            continue
        nights = tuple(batch.trials for batch in found.batches)
        where = "any machine" if pool_hardware else "this machine"
        samples[key] = BaselineSample(nights, f"last {len(nights)} accepted batches ({where})")
    return samples
