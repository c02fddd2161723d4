"""A configuration's baseline: its last K accepted batches of trials, one figure per trial.

A batch is the trials of one invocation (one nightly), so the batches are the nights
the gate compares against: pooled, their trials are the gate's baseline sample; one
median per batch gives the between-night noise (harness.gate.statistics). Pure: the
store (harness.history.store) hands over the rows it read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from harness.history.rows import TrialRow
from harness.history.schema import frame_rows

# Nights in a baseline unless told otherwise: a week of nightlies.
DEFAULT_BASELINE_BATCHES = 7


@dataclass(frozen=True)
class BaselineBatch:
    """One accepted batch's trials of the configuration."""

    batch_id: str
    # The harness commits its trials ran (one, unless the batch spans a checkout change).
    git_shas: tuple[str, ...]
    # When its last trial started (UTC): batches are ordered by it.
    recorded_at: datetime
    values: tuple[float, ...]
    # The same trials whole (health, every figure), in the order of `values`.
    trials: tuple[TrialRow, ...]
    # True when every trial was STABLE and had no failed request.
    clean: bool


@dataclass(frozen=True)
class Baseline:
    """The last accepted batches of one configuration, oldest first."""

    config_key: str
    metric: str
    batches: tuple[BaselineBatch, ...]

    @property
    def values(self) -> tuple[float, ...]:
        """Every batch's trials pooled: the gate's baseline sample."""
        return tuple(value for batch in self.batches for value in batch.values)

    @property
    def nights(self) -> tuple[tuple[float, ...], ...]:
        """The trials batch by batch, for `harness.gate.statistics.between_night_noise`."""
        return tuple(batch.values for batch in self.batches)


def latest_batches(trials: pd.DataFrame, metric: str, k: int, before: datetime | None = None) -> list[BaselineBatch]:
    """The `k` most recent batches in `trials` (columns of the store's frame), oldest first.

    Trials without a value of `metric` are left out, and a batch left with none is not
    a batch. With `before`, only batches whose every trial started before it count.
    """
    measured = trials.loc[trials[metric].notna()]
    batches = []
    for batch_id, rows in measured.groupby("batch_id", sort=False):
        last = rows["recorded_at"].max().to_pydatetime()
        if before is not None and last >= before:
            continue
        batches.append(BaselineBatch(
            batch_id=str(batch_id),
            git_shas=tuple(sorted({str(sha) for sha in rows["git_sha"].dropna()})),
            recorded_at=last,
            values=tuple(float(value) for value in rows[metric]),
            trials=tuple(frame_rows(rows)),
            clean=bool(rows["stable"].all() and (rows["errors"] == 0).all()),
        ))
    batches.sort(key=lambda batch: batch.recorded_at)
    return batches[-k:]
