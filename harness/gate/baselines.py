"""Where a configuration's baseline sample comes from: a pinned result, or the history."""

from __future__ import annotations

from collections.abc import Sequence

from harness.gate.compare import BaselineSample, group_by_config
from harness.history.rows import RepetitionRow
from harness.history.store import HistoryStore


def from_directory(repetitions: Sequence[RepetitionRow], description: str) -> dict[str, BaselineSample]:
    """A pinned result as one night per configuration."""
    return {key: BaselineSample((tuple(rows),), description) for key, rows in group_by_config(repetitions).items()}


def from_history(
    store: HistoryStore,
    candidate: Sequence[RepetitionRow],
    last: int,
    pool_hardware: bool = False,
    pool_servers: bool = False,
) -> dict[str, BaselineSample]:
    """Each candidate configuration's last `last` accepted nights from the history.

    Only from the candidate's machine and server build unless pooled; only nights that ended
    before the candidate's first repetition began, so it is never its own baseline. A
    configuration with no such night on its own server build (not pooled) is an upgrade: its
    baseline is the last `last` accepted nights of the build before it (HistoryStore.previous_server),
    labelled "<previous build> -> <this build>". A configuration left out has no accepted
    night here under any server build.
    """
    samples = {}
    where = "any machine" if pool_hardware else "this machine"
    for key, rows in group_by_config(candidate).items():
        head = rows[0]
        start = min(row.recorded_at for row in rows)
        found = store.baseline(key, last, hardware_key=head.hardware_key, server=head.server,
                               pool_hardware=pool_hardware, pool_servers=pool_servers, before=start)
        previous = None
        if not found.nights and not pool_servers:
            previous = store.previous_server(key, head.server, start, hardware_key=head.hardware_key,
                                             pool_hardware=pool_hardware)
            if previous is not None:
                found = store.baseline(key, last, hardware_key=head.hardware_key, server=previous,
                                       pool_hardware=pool_hardware, before=start)
        if not found.nights:
            continue
        nights = tuple(night.repetitions for night in found.nights)
        if previous is None:
            samples[key] = BaselineSample(nights, f"last {len(nights)} accepted nights ({where})")
        else:
            samples[key] = BaselineSample(
                nights, f"last {len(nights)} accepted nights of the previous server build, {previous} ({where})",
                upgrade=f"{previous} -> {head.server}")
    return samples
