"""Token-length distributions: where a workload's prompt and output lengths come from.

Every distribution is a frozen pydantic model tagged by `kind` and has
`sample(rng, n) -> int64 array`. Sampling consumes only the Generator it is given, so
the same Generator state always yields the same lengths. Continuous draws are rounded
half-to-even (`numpy.rint`, like Python's `round`), and draws outside the allowed range
are re-drawn, never clipped: clipping would pile probability mass onto the bound.
"""

from __future__ import annotations

import csv
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Literal, TextIO

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.workload.limits import PositiveFinite, TokenMean, Tokens

Order = Literal["sample", "cycle"]

# A rejection window that keeps fewer draws than this is almost surely a typo, and
# would make sampling crawl; validation refuses it instead.
MIN_ACCEPTANCE = 0.01


class _Distribution(BaseModel, ABC):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw `n` positive lengths (int64) using only `rng`."""


class FixedLength(_Distribution):
    """Every request gets the same length."""

    kind: Literal["fixed"] = Field("fixed", description="Distribution tag.")
    value: Tokens = Field(description="The length, in tokens.")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Return `n` copies of `value` (consumes nothing from `rng`)."""
        return np.full(n, self.value, dtype=np.int64)


class UniformLength(_Distribution):
    """Integers uniform on [round(mean*(1-spread)), round(mean*(1+spread))], both ends included."""

    kind: Literal["uniform"] = Field("uniform", description="Distribution tag.")
    mean: TokenMean = Field(description="Centre of the range, in tokens.")
    spread: Annotated[float, Strict()] = Field(
        ge=0, lt=1, description="Half-width of the range as a fraction of the mean."
    )

    @field_validator("spread")
    @classmethod
    def _low_end_positive(cls, spread: float, info: ValidationInfo) -> float:
        mean = info.data.get("mean")
        if mean is not None and round(mean * (1 - spread)) < 1:
            raise ValueError(
                f"the low end round(mean*(1-spread)) = {round(mean * (1 - spread))} is not"
                " a positive length"
            )
        return spread

    @property
    def low(self) -> int:
        """Smallest length drawn."""
        return round(self.mean * (1 - self.spread))

    @property
    def high(self) -> int:
        """Largest length drawn."""
        return round(self.mean * (1 + self.spread))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw `n` integers uniformly from [low, high]."""
        return rng.integers(self.low, self.high, size=n, endpoint=True, dtype=np.int64)


class ExponentialLength(_Distribution):
    """Exponential(mean) rounded to an integer, re-drawn until it lies in [min, cap].

    This is the Anyscale benchmark's "capped_exponential": `mean` is the scale of the
    exponential before the cap, so with a cap near or below it the drawn mean is lower.
    """

    kind: Literal["exponential"] = Field("exponential", description="Distribution tag.")
    mean: TokenMean = Field(description="Mean of the exponential before rejection, in tokens.")
    min: Tokens = Field(1, description="Smallest accepted length; smaller draws are re-drawn.")
    cap: Tokens = Field(description="Largest accepted length; larger draws are re-drawn.")

    @field_validator("cap")
    @classmethod
    def _window_reachable(cls, cap: int, info: ValidationInfo) -> int:
        mean, low = info.data.get("mean"), info.data.get("min")
        if mean is None or low is None:
            return cap
        if cap < low:
            raise ValueError(f"must be >= min (got {cap} < {low})")
        _check_acceptance(_exponential_acceptance(mean, low, cap))
        return cap

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw `n` lengths, re-drawing any outside [min, cap]."""
        return _rejection_sample(
            lambda size: rng.exponential(self.mean, size),
            n,
            self.min,
            self.cap,
            _exponential_acceptance(self.mean, self.min, self.cap),
        )


class NormalLength(_Distribution):
    """Normal(mean, std) rounded to an integer, re-drawn until it lies in [min, max]."""

    kind: Literal["normal"] = Field("normal", description="Distribution tag.")
    mean: TokenMean = Field(description="Mean before rejection, in tokens.")
    std: TokenMean = Field(description="Standard deviation before rejection, in tokens.")
    min: Tokens = Field(1, description="Smallest accepted length; smaller draws are re-drawn.")
    max: Tokens = Field(description="Largest accepted length; larger draws are re-drawn.")

    @field_validator("max")
    @classmethod
    def _window_reachable(cls, high: int, info: ValidationInfo) -> int:
        mean, std, low = info.data.get("mean"), info.data.get("std"), info.data.get("min")
        if mean is None or std is None or low is None:
            return high
        if high < low:
            raise ValueError(f"must be >= min (got {high} < {low})")
        _check_acceptance(_normal_acceptance(mean, std, low, high))
        return high

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw `n` lengths, re-drawing any outside [min, max]."""
        return _rejection_sample(
            lambda size: rng.normal(self.mean, self.std, size),
            n,
            self.min,
            self.max,
            _normal_acceptance(self.mean, self.std, self.min, self.max),
        )


class ChoiceLength(_Distribution):
    """Lengths picked from a list: at random (optionally weighted), or cycled in order."""

    kind: Literal["choice"] = Field("choice", description="Distribution tag.")
    values: tuple[Tokens, ...] = Field(min_length=1, description="The lengths to pick from.")
    order: Order = Field(
        "sample",
        description='"sample": independent random picks; "cycle": the values in order, repeating.',
    )
    weights: tuple[PositiveFinite, ...] | None = Field(
        None,
        description="Relative pick weights, one per value, positive; normalised to sum 1."
        " Only with order: sample. Default: equal weights.",
    )

    @field_validator("weights")
    @classmethod
    def _weights_match_values(
        cls, weights: tuple[float, ...] | None, info: ValidationInfo
    ) -> tuple[float, ...] | None:
        if weights is None:
            return None
        if info.data.get("order") == "cycle":
            raise ValueError("cannot be combined with order: cycle")
        values = info.data.get("values")
        if values is not None and len(weights) != len(values):
            raise ValueError(
                f"needs one weight per value (got {len(weights)} weights for {len(values)} values)"
            )
        return weights

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Pick `n` values (cycling consumes nothing from `rng`)."""
        values = np.asarray(self.values, dtype=np.int64)
        if self.order == "cycle":
            return np.resize(values, n)
        # Scaled by the largest first: weights near the float limit would sum to inf.
        scaled = None if self.weights is None else np.asarray(self.weights) / max(self.weights)
        p = None if scaled is None else scaled / scaled.sum()
        return rng.choice(values, size=n, p=p)


# Validation context key: the spec is read back from a run directory, not loaded to be run.
RECORDED_CONTEXT = "recorded"


class FileLength(_Distribution):
    """Lengths read from a CSV or JSONL file, then picked at random or cycled in order.

    JSONL (suffix .jsonl): one object per line, lengths under `column` (default "tokens").
    Anything else is read as CSV: the column named `column`, else one named "tokens",
    else the first column; with neither `column` nor a "tokens" header, a first row
    whose first cell is an integer is data (the file has no header). A relative `path`
    resolves against the directory of the spec file (validation context "base_dir").
    """

    kind: Literal["file"] = Field("file", description="Distribution tag.")
    column: str | None = Field(
        None, description='Column (CSV) or key (JSONL) holding the lengths. Default: "tokens".'
    )
    order: Order = Field(
        "sample",
        description='"sample": random picks with replacement; "cycle": file order, repeating.',
    )
    path: Path = Field(description="CSV or JSONL file; relative to the spec file's directory.")
    # A tuple, not an array: pydantic compares private attributes in ==.
    _lengths: tuple[int, ...] = PrivateAttr()

    @field_validator("path")
    @classmethod
    def _resolve(cls, path: Path, info: ValidationInfo) -> Path:
        base_dir = (info.context or {}).get("base_dir")
        return path if path.is_absolute() or base_dir is None else Path(base_dir) / path

    @model_validator(mode="after")
    def _load(self, info: ValidationInfo) -> FileLength:
        # A spec recorded in a run's manifest is not loaded again: its file may not be on this machine.
        recorded = (info.context or {}).get(RECORDED_CONTEXT, False)
        self._lengths = () if recorded else tuple(_read_lengths(self.path, self.column))
        return self

    @property
    def lengths(self) -> tuple[int, ...]:
        """The lengths read from the file, in file order."""
        return self._lengths

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Pick `n` of the file's lengths (cycling consumes nothing from `rng`)."""
        lengths = np.asarray(self._lengths, dtype=np.int64)
        if self.order == "cycle":
            return np.resize(lengths, n)
        return rng.choice(lengths, size=n)


class TraceLength(_Distribution):
    """Each request's own length, as its row of the workload's trace gives it (harness.workload.trace)."""

    kind: Literal["trace"] = Field("trace", description="Distribution tag.")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise TypeError("a trace's lengths are read from its rows, not drawn")


LengthDistribution = Annotated[
    FixedLength | UniformLength | ExponentialLength | NormalLength | ChoiceLength | FileLength | TraceLength,
    Field(discriminator="kind"),
]


# Acceptance: the share of raw draws that round into [low, high], i.e. that fall in
# [low - 0.5, high + 0.5).


def _exponential_acceptance(mean: float, low: int, high: int) -> float:
    return math.exp(-(low - 0.5) / mean) - math.exp(-(high + 0.5) / mean)


def _normal_acceptance(mean: float, std: float, low: int, high: int) -> float:
    def cdf(x: float) -> float:
        return 0.5 * (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0))))

    return cdf(high + 0.5) - cdf(low - 0.5)


def _check_acceptance(acceptance: float) -> None:
    if acceptance < MIN_ACCEPTANCE:
        raise ValueError(
            f"the accepted range keeps only {acceptance:.2%} of draws"
            f" (need >= {MIN_ACCEPTANCE:.0%}): it is too far from the mean"
        )


def _rejection_sample(
    draw: Callable[[int], np.ndarray], n: int, low: int, high: int, acceptance: float
) -> np.ndarray:
    """Round draws to integers and keep the first `n` that land in [low, high]."""
    kept: list[np.ndarray] = []
    missing = n
    while missing > 0:
        # Over-draw by the expected rejection rate so one pass nearly always suffices.
        raw = np.rint(draw(math.ceil(missing / acceptance * 1.1) + 8)).astype(np.int64)
        accepted = raw[(raw >= low) & (raw <= high)][:missing]
        kept.append(accepted)
        missing -= accepted.size
    return np.concatenate(kept) if kept else np.empty(0, dtype=np.int64)


def _read_lengths(path: Path, column: str | None) -> list[int]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            if path.suffix.lower() == ".jsonl":
                cells = _jsonl_cells(handle, column or "tokens", path)
            else:
                cells = _csv_cells(handle, column, path)
            lengths = [_positive_int(cell, where, path) for where, cell in cells]
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not lengths:
        raise ValueError(f"{path} holds no lengths")
    return lengths


def _jsonl_cells(lines: Iterable[str], key: str, path: Path) -> list[tuple[str, object]]:
    cells = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or key not in record:
            raise ValueError(f"{path} line {number}: no key {key!r}")
        cells.append((f"line {number}", record[key]))
    return cells


def _csv_cells(handle: TextIO, column: str | None, path: Path) -> list[tuple[str, object]]:
    reader = csv.reader(handle)
    rows = [(reader.line_num, row) for row in reader if row]
    if not rows:
        return []
    header = [cell.strip() for cell in rows[0][1]]
    if column is not None and column not in header:
        raise ValueError(f"{path}: no column {column!r} (columns: {', '.join(header)})")
    name = column or ("tokens" if "tokens" in header else None)
    if name is None and _is_int(header[0]):
        index, data = 0, rows
    else:
        index, data = (header.index(name) if name else 0), rows[1:]
    return [(f"line {number}", row[index] if index < len(row) else "") for number, row in data]


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _positive_int(cell: object, where: str, path: Path) -> int:
    value = int(cell.strip()) if isinstance(cell, str) and _is_int(cell.strip()) else cell
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path} {where}: {cell!r} is not a positive integer length")
    return value
