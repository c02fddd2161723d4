"""A configuration's baseline: its last K accepted nights of repetitions, one figure per repetition.

A night is the repetitions of one invocation (rows sharing an `invocation_id`; only
`nightly` accepts its rows), so the nights are what the gate compares against: pooled,
their repetitions are the gate's baseline sample; one median per night gives the
between-night noise (harness.gate.statistics). Pure: the
store (harness.history.store) hands over the rows it read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from harness.history.rows import RepetitionRow
from harness.history.schema import frame_rows


@dataclass(frozen=True)
class BaselineNight:
    """One accepted night's repetitions of the configuration."""

    invocation_id: str
    # The harness commits its repetitions ran (one, unless the night spans a checkout change).
    git_shas: tuple[str, ...]
    # When its last repetition started (UTC): nights are ordered by it.
    recorded_at: datetime
    values: tuple[float, ...]
    # The same repetitions whole (health, every figure), in the order of `values`.
    repetitions: tuple[RepetitionRow, ...]
    # True when every repetition was STABLE and had no failed request.
    clean: bool


@dataclass(frozen=True)
class Baseline:
    """The last accepted nights of one configuration, oldest first."""

    config_key: str
    metric: str
    nights: tuple[BaselineNight, ...]

    @property
    def values(self) -> tuple[float, ...]:
        """Every night's repetitions pooled: the gate's baseline sample."""
        return tuple(value for night in self.nights for value in night.values)

    @property
    def night_values(self) -> tuple[tuple[float, ...], ...]:
        """The values night by night, for `harness.gate.statistics.between_night_noise`."""
        return tuple(night.values for night in self.nights)


def latest_nights(
    repetitions: pd.DataFrame, metric: str, k: int, before: datetime | None = None
) -> list[BaselineNight]:
    """The `k` most recent nights in `repetitions` (columns of the store's frame), oldest first.

    Repetitions without a value of `metric` are left out, and a night left with none is not
    a night. With `before`, only nights whose every repetition started before it count.
    """
    measured = repetitions.loc[repetitions[metric].notna()]
    nights = []
    for invocation_id, rows in measured.groupby("invocation_id", sort=False):
        last = rows["recorded_at"].max().to_pydatetime()
        if before is not None and last >= before:
            continue
        nights.append(BaselineNight(
            invocation_id=str(invocation_id),
            git_shas=tuple(sorted({str(sha) for sha in rows["git_sha"].dropna()})),
            recorded_at=last,
            values=tuple(float(value) for value in rows[metric]),
            repetitions=tuple(frame_rows(rows)),
            clean=bool(rows["stable"].all() and (rows["errors"] == 0).all()),
        ))
    nights.sort(key=lambda night: night.recorded_at)
    return nights[-k:]
