"""Production traces as workloads: one row per request, with its arrival time and its lengths.

A trace is a CSV, JSONL or Parquet file. `TraceSource` names the file, how its columns map
(explicitly, or by a preset for a public layout: the Azure LLM inference trace, the
Mooncake trace), and which part of it is replayed how fast. `read_trace` streams the file
in batches and stops at the last row it needs, so the first 10,000 requests of a
million-row trace are read without the rest. Every row is checked as it is read; a bad
row is one line naming the file, the row and what is wrong. With `conversation:` the rows
of a session are the turns of one chat (harness.workload.conversation links them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from harness.errors import UsageError
from harness.workload.limits import MAX_REQUESTS, Count, NonNegativeSeconds, PositiveFinite, Seconds

TraceFormat = Literal["csv", "jsonl", "parquet"]
TimeUnit = Literal["s", "ms", "datetime"]
# Rows read per batch: large enough that numpy does the work, small enough to stop early.
BATCH_ROWS = 65_536
# Bytes looked at to tell text from a binary file.
SNIFF_BYTES = 8192
# The numeric columns only a conversation reads.
CONVERSATION_COLUMNS = ("turn", "think_s")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceColumns(_Frozen):
    """Which column holds what: the three a replay needs, and the ones kept in the records."""

    arrival: str = Field(description="Arrival time of the request (absolute or relative; see time_unit).")
    prompt_tokens: str = Field(description="Prompt length, tokens.")
    output_tokens: str = Field(description="Output length, tokens (forced exactly, as for any workload).")
    session: str | None = Field(None, description="A session or conversation id, kept in the records.")
    hash_ids: str | None = Field(None, description="Prefix block hash ids (a list), kept in the records.")
    label: str | None = Field(None, description="A class label (a tenant, an application), kept in the records.")
    turn: str | None = Field(None, description="A conversation's turn number within its session, counting up by one"
                             " (conversation only; default: the session's rows in order).")
    think_s: str | None = Field(None, description="Seconds the user thought between the previous turn's answer and"
                                " this turn, on the trace's clock (conversation only; default: conversation.think_s).")

    def named(self) -> dict[str, str]:
        """Each column the file must have, by what it holds."""
        return {role: column for role, column in self.model_dump().items() if column is not None}


# The public layouts, as their files name their columns.
PRESETS: dict[str, tuple[TraceColumns, TimeUnit]] = {
    # Azure LLM inference trace (AzurePublicDataset, 2023/2024): TIMESTAMP is a date and time of day.
    "azure": (TraceColumns(arrival="TIMESTAMP", prompt_tokens="ContextTokens", output_tokens="GeneratedTokens"),
              "datetime"),
    # Mooncake (FAST'25) traces: JSONL, timestamp in milliseconds from the trace's start.
    "mooncake": (TraceColumns(arrival="timestamp", prompt_tokens="input_length", output_tokens="output_length",
                              hash_ids="hash_ids"), "ms"),
}


class Conversation(_Frozen):
    """Replay each session as a chat: a turn waits for the previous turn's answer, and its prompt carries it."""

    think_s: NonNegativeSeconds = Field(0.0, description="Think time before each later turn, trace seconds (scaled"
                                        " like the arrivals), where the trace has no think_s column.")


class TraceSource(_Frozen):
    """A trace file and how to replay it: its columns, its clock, the part replayed and its speed."""

    path: Path = Field(description="CSV, JSONL or Parquet file; relative to the workload file's directory.")
    format: TraceFormat | None = Field(None, description="File format; default: from the suffix (.csv, .jsonl,"
                                       " .parquet).")
    preset: Literal["azure", "mooncake"] | None = Field(None, description="A public trace's column layout.")
    columns: TraceColumns | None = Field(None, description="Column mapping (required without a preset; with one,"
                                         " it replaces the preset's).")
    time_unit: TimeUnit | None = Field(None, description="Arrival column's unit: s, ms, or datetime (an ISO date"
                                       " and time); default: the preset's, else s.")
    time_scale: PositiveFinite = Field(1.0, description="Replay this many times faster than the trace (10: ten"
                                       " times the rate, the same shape).")
    rate: PositiveFinite | None = Field(None, description="Replay at this mean rate (requests/s over the rows"
                                        " replayed) instead of a time_scale: the time scale that gives it is derived"
                                        " (what sweep-rates sets at each rate).")
    start_s: float = Field(0.0, ge=0, allow_inf_nan=False, description="Window start, trace seconds after its"
                           " first row.")
    window_s: Seconds | None = Field(None, description="Window length, trace seconds (default: to the end).")
    max_tokens: Count | None = Field(None, description="Most prompt plus output tokens a request may ask for"
                                     " (the model's context); rows over it are handled by over_limit.")
    over_limit: Literal["refuse", "clip"] = Field("refuse", description="A row over max_tokens: refuse the trace,"
                                                  " naming how many; or clip its output (then its prompt) and"
                                                  " count it.")
    block_tokens: Count | None = Field(None, description="Tokens per block of the hash_ids column (Mooncake: 512):"
                                       " each prompt is then built from its blocks, so rows that share a hash id"
                                       " share that block's tokens and a prefix cache meets the reuse the trace"
                                       " recorded. Default: every prompt's text is its own.")
    conversation: Conversation | None = Field(None, description="Replay the sessions as conversations (needs a"
                                              " session column): turn k is sent think_s after turn k-1's answer"
                                              " ended, its prompt the earlier turns' prompts and answers, then its"
                                              " own text.")

    @field_validator("path")
    @classmethod
    def _resolve(cls, path: Path, info: ValidationInfo) -> Path:
        base_dir = (info.context or {}).get("base_dir")
        return path if path.is_absolute() or base_dir is None else Path(base_dir) / path

    @model_validator(mode="after")
    def _mapped(self) -> TraceSource:
        if self.columns is None and self.preset is None:
            raise ValueError("columns: give a preset (azure, mooncake) or the columns")
        if self.rate is not None and self.time_scale != 1.0:
            raise ValueError("rate, time_scale: give one (a rate derives its own time scale)")
        if self.block_tokens is not None and self.mapping.hash_ids is None:
            raise ValueError("block_tokens: needs a hash_ids column (columns.hash_ids, or preset: mooncake) naming"
                             " each row's blocks")
        return self._conversation_consistent()

    def _conversation_consistent(self) -> TraceSource:
        mapping = self.mapping
        if self.conversation is None:
            turned = [role for role in CONVERSATION_COLUMNS if getattr(mapping, role) is not None]
            if turned:
                raise ValueError(f"columns.{turned[0]}: read only for a conversation: add conversation: {{}}")
            return self
        if mapping.session is None:
            raise ValueError("conversation: needs a session column (columns.session) naming each row's chat")
        if self.block_tokens is not None:
            raise ValueError("block_tokens: a conversation's turns already share their earlier turns' text: leave"
                             " block_tokens out")
        if self.over_limit == "clip":
            raise ValueError("over_limit: clip does not apply to a conversation (clipping one turn would change every"
                             " later turn's prompt): a conversation over max_tokens is refused")
        return self

    @property
    def mapping(self) -> TraceColumns:
        """The columns read: the explicit mapping, else the preset's."""
        return self.columns or PRESETS[str(self.preset)][0]

    @property
    def unit(self) -> TimeUnit:
        """The arrival column's unit."""
        return self.time_unit or (PRESETS[self.preset][1] if self.preset else "s")

    @property
    def file_format(self) -> TraceFormat:
        """The file's format: as given, else from its suffix (CSV for any other)."""
        if self.format is not None:
            return self.format
        suffix = self.path.suffix.lower()
        return "jsonl" if suffix in (".jsonl", ".ndjson") else "parquet" if suffix == ".parquet" else "csv"


@dataclass(frozen=True)
class TraceRows:
    """The rows a replay sends, in arrival order: numpy columns of one length."""

    arrival_s: np.ndarray  # float64, seconds after the window's start, on the replay's clock
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    row: np.ndarray  # int64: the row's index among the file's data rows, 0-based
    # The optional columns, as text per row (None where the trace has no such column).
    session: list[str] | None
    hash_ids: list[str] | None
    label: list[str] | None
    # A conversation's columns: turn numbers (int64, where the trace has them) and think times (float64,
    # seconds on the replay's clock, scaled like the arrivals; conversation.think_s where the trace has none).
    turn: np.ndarray | None
    think_s: np.ndarray | None
    # Rows over max_tokens that were clipped (over_limit: clip).
    clipped: int

    def __len__(self) -> int:
        return len(self.row)


def read_trace(source: TraceSource, limit: int | None = None) -> TraceRows:
    """The rows of `source`'s window, at most `limit` of them, replayed `source.time_scale` times faster.

    Raises UsageError (one line naming the file, and the row where there is one) for a
    missing file or column, a binary or empty file, a bad length, an arrival that goes
    backwards, and a window holding more rows than a plan may (harness.workload.limits).
    """
    path = source.path
    _check_text(path, source.file_format)
    reader = _Collector(source, limit)
    for batch in _batches(source):
        if not reader.add(batch):
            break
    return reader.rows()


class _Collector:
    """Checks the rows it is given and keeps those of the window, until the limit or the window's end."""

    def __init__(self, source: TraceSource, limit: int | None) -> None:
        self.source, self.limit = source, limit
        # One row past the most a plan may hold tells a window that is too large.
        self.cap = limit if limit is not None else MAX_REQUESTS
        self.first: float | None = None
        self.previous = -math.inf
        self.seen = 0
        self.count = 0
        self.kept: dict[str, list[np.ndarray]] = {"time": [], "prompt": [], "output": [], "row": []}
        self.texts: dict[str, list[str]] = {role: [] for role in ("session", "hash_ids", "label")}
        # A conversation's numeric columns, those the trace maps.
        self.numbers: dict[str, list[np.ndarray]] = {role: [] for role in CONVERSATION_COLUMNS
                                                     if role in source.mapping.named()}

    def add(self, batch: dict[str, Any]) -> bool:
        """Take one batch (columns by role); False once no later row can be replayed."""
        times = self._seconds(batch["arrival"])
        rows = np.arange(self.seen, self.seen + len(times))
        self.seen += len(times)
        self._check_order(times, rows)
        if self.first is None and len(times):
            self.first = float(times[0])
        relative = times - (self.first or 0.0)
        start, window = self.source.start_s, self.source.window_s
        inside = relative >= start
        if window is not None:
            inside &= relative < start + window
        take = np.flatnonzero(inside)[: max(self.cap + 1 - self.count, 0)]
        self.kept["time"].append(relative[take])
        self.kept["prompt"].append(self._lengths(batch["prompt_tokens"], rows, take, "prompt_tokens"))
        self.kept["output"].append(self._lengths(batch["output_tokens"], rows, take, "output_tokens"))
        self.kept["row"].append(rows[take])
        for role, texts in self.texts.items():
            if role in batch:
                texts.extend(_text(batch[role][i]) for i in take)
        for role, numbers in self.numbers.items():
            numbers.append(self._conversation_column(batch[role], rows, take, role))
        self.count += len(take)
        if self.count > self.cap:
            if self.limit is None:
                raise UsageError(f"{self.source.path}: the window holds more than {MAX_REQUESTS:,} rows (the most a"
                                 " plan may): set the workload's num_requests or the trace's window_s")
            self._trim(self.limit)
            return False
        return not (window is not None and len(relative) and relative[-1] >= start + window)

    def rows(self) -> TraceRows:
        """The rows kept, on the replay's clock."""
        path = self.source.path
        if self.seen == 0:
            raise UsageError(f"{path}: no rows (an empty trace)")
        if self.count == 0:
            raise UsageError(f"{path}: no row in the window (start_s {self.source.start_s:g}, window_s"
                             f" {self.source.window_s}) of its {self.seen} rows")
        time, prompt, output, row = (np.concatenate(self.kept[name]) for name in ("time", "prompt", "output", "row"))
        prompt, output, clipped = self._fit(prompt, output, row)
        mapping = self.source.mapping.named()
        offset = np.maximum(time - self.source.start_s, 0.0)
        scale = self._time_scale(offset)
        numbers = {role: np.concatenate(parts) for role, parts in self.numbers.items()}
        conversation = self.source.conversation
        # A conversation without a think_s column thinks its default before every turn.
        think = numbers.get("think_s", None if conversation is None else np.full(len(row), conversation.think_s))
        return TraceRows(
            arrival_s=offset / scale,
            prompt_tokens=prompt, output_tokens=output, row=row,
            session=self.texts["session"] if "session" in mapping else None,
            hash_ids=self.texts["hash_ids"] if "hash_ids" in mapping else None,
            label=self.texts["label"] if "label" in mapping else None,
            turn=numbers["turn"].astype(np.int64) if "turn" in numbers else None,
            think_s=None if think is None else think / scale,
            clipped=clipped,
        )

    def _time_scale(self, offset: np.ndarray) -> float:
        """The replay's speed-up: the source's time_scale, or the one that gives its mean rate.

        n rows whose arrivals span t seconds of trace time are n-1 gaps of t/(n-1) on average;
        replayed at rate r each gap is 1/r, so the scale is r t/(n-1).
        """
        rate = self.source.rate
        if rate is None:
            return self.source.time_scale
        span = float(offset[-1] - offset[0]) if len(offset) > 1 else 0.0
        if span <= 0:
            raise UsageError(f"{self.source.path}: its window's rows all arrive at once: no rate to scale to")
        return rate * span / (len(offset) - 1)

    def _trim(self, count: int) -> None:
        for name, parts in self.kept.items():
            self.kept[name] = [np.concatenate(parts)[:count]]
        for role, texts in self.texts.items():
            self.texts[role] = texts[:count]
        for role, numbers in self.numbers.items():
            self.numbers[role] = [np.concatenate(numbers)[:count]]
        self.count = count

    def _seconds(self, values: Any) -> np.ndarray:
        path, unit, column = self.source.path, self.source.unit, self.source.mapping.arrival
        if unit == "datetime":
            try:
                stamps = np.array([str(value) for value in values], dtype="datetime64[ns]")
            except ValueError as exc:
                raise UsageError(f"{path}: {column}: not a date and time ({exc}); give time_unit s or ms for"
                                 " numbers") from None
            return stamps.astype("int64") / 1e9
        numbers = np.asarray(values, dtype=np.float64)
        return numbers / 1000.0 if unit == "ms" else numbers

    def _check_order(self, times: np.ndarray, rows: np.ndarray) -> None:
        if not len(times):
            return
        column = self.source.mapping.arrival
        if not np.all(np.isfinite(times)):
            bad = int(rows[np.flatnonzero(~np.isfinite(times))[0]])
            raise UsageError(f"{self.source.path}: row {bad + 1}: {column} is not a number")
        steps = np.diff(np.concatenate([[self.previous], times]))
        if np.any(steps < 0):
            at = int(rows[np.flatnonzero(steps < 0)[0]])
            raise UsageError(f"{self.source.path}: row {at + 1}: {column} goes backwards (a trace is replayed in"
                             " arrival order: sort it by arrival)")
        self.previous = float(times[-1])

    def _lengths(self, values: np.ndarray, rows: np.ndarray, take: np.ndarray, role: str) -> np.ndarray:
        numbers = np.asarray(values, dtype=np.float64)[take]
        bad = ~np.isfinite(numbers) | (numbers < 1) | (numbers != np.round(numbers))
        if np.any(bad):
            at = int(np.flatnonzero(bad)[0])
            column = getattr(self.source.mapping, role)
            raise UsageError(f"{self.source.path}: row {int(rows[take[at]]) + 1}: {column} must be a whole number of"
                             f" tokens of at least 1, got {_shown(numbers[at])}")
        return np.asarray(numbers.astype(np.int64))

    def _conversation_column(self, values: np.ndarray, rows: np.ndarray, take: np.ndarray, role: str) -> np.ndarray:
        """A turn (a whole number, at least 0) or a think time (seconds, at least 0), checked row by row."""
        numbers = np.asarray(values, dtype=np.float64)[take]
        bad = ~np.isfinite(numbers) | (numbers < 0)
        if role == "turn":
            bad |= numbers != np.round(numbers)
        if np.any(bad):
            at = int(np.flatnonzero(bad)[0])
            column = getattr(self.source.mapping, role)
            what = "a whole number of at least 0" if role == "turn" else "a number of seconds of at least 0"
            raise UsageError(f"{self.source.path}: row {int(rows[take[at]]) + 1}: {column} must be {what}, got"
                             f" {_shown(numbers[at])}")
        return np.asarray(numbers)

    def _fit(self, prompt: np.ndarray, output: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        limit = self.source.max_tokens
        if limit is None:
            return prompt, output, 0
        over = prompt + output > limit
        count = int(over.sum())
        if count and self.source.over_limit == "refuse":
            first = int(np.flatnonzero(over)[0])
            raise UsageError(f"{self.source.path}: {count} of {len(row)} rows ask for more than max_tokens {limit}"
                             f" (first: row {int(row[first]) + 1}, {int(prompt[first])} + {int(output[first])});"
                             " set over_limit: clip to clip them")
        prompt = np.where(over, np.minimum(prompt, limit - 1), prompt)
        output = np.where(over, np.maximum(limit - prompt, 1), output)
        return prompt, output, count


def _batches(source: TraceSource) -> Iterator[dict[str, Any]]:
    """The file's rows in batches, each a dict of columns by role: numbers as float arrays (NaN where
    a value is missing or not a number), the rest as lists."""
    mapping = source.mapping.named()
    numeric = {"prompt_tokens", "output_tokens", *CONVERSATION_COLUMNS} | (set() if source.unit == "datetime"
                                                                          else {"arrival"})
    if source.file_format == "jsonl":
        yield from _jsonl_batches(source.path, mapping, numeric)
        return
    import pyarrow as pa

    try:
        if source.file_format == "parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(source.path)
            _require_columns(source.path, parquet.schema_arrow.names, mapping)
            stream: Iterator[pa.RecordBatch] = parquet.iter_batches(batch_size=BATCH_ROWS,
                                                                    columns=list(dict.fromkeys(mapping.values())))
        else:
            stream = _csv_batches(source, mapping, numeric)
        for batch in stream:
            yield {role: _column(batch.column(column), role in numeric) for role, column in mapping.items()}
    except (pa.ArrowInvalid, OSError) as exc:
        raise UsageError(f"{source.path}: not a readable {source.file_format} trace: {' '.join(str(exc).split())}") \
            from None


def _column(values: Any, numeric: bool) -> Any:
    """A pyarrow column as the collector reads it: numbers as floats (a bool or text column as NaN), else a list."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not numeric:
        return values.to_pylist()
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    return np.array([_number(value) for value in values.to_pylist()], dtype=np.float64)


def _csv_batches(source: TraceSource, mapping: dict[str, str], numeric: set[str]) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.csv as csv

    # Numbers as floats, so that "1.5" is this module's error (naming the row), not a conversion failure.
    types = {column: pa.float64() if role in numeric else pa.string() for role, column in mapping.items()}
    reader = csv.open_csv(source.path, read_options=csv.ReadOptions(block_size=1 << 20),
                          convert_options=csv.ConvertOptions(column_types=types))
    _require_columns(source.path, reader.schema.names, mapping)
    yield from reader


def _jsonl_batches(path: Path, mapping: dict[str, str], numeric: set[str]) -> Iterator[dict[str, Any]]:
    batch: dict[str, list[Any]] = {role: [] for role in mapping}
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines):
                if not line.strip():
                    continue
                record = _record(path, number, line, mapping)
                for role, column in mapping.items():
                    batch[role].append(record[column])
                if len(batch["arrival"]) == BATCH_ROWS:
                    yield _typed(batch, numeric)
                    batch = {role: [] for role in mapping}
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if batch["arrival"]:
        yield _typed(batch, numeric)


def _record(path: Path, number: int, line: str, mapping: dict[str, str]) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {number + 1}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise UsageError(f"{path}: line {number + 1}: not a JSON object")
    missing = [column for column in mapping.values() if column not in record]
    if missing:
        raise UsageError(f"{path}: line {number + 1}: no {missing[0]!r} (its keys: {', '.join(record)}); map the"
                         " trace's columns under trace.columns")
    return record


def _typed(batch: dict[str, list[Any]], numeric: set[str]) -> dict[str, Any]:
    return {role: np.array([_number(v) for v in values], dtype=np.float64) if role in numeric else values
            for role, values in batch.items()}


def _number(value: Any) -> float:
    # A bool is an int to Python, not a length; a string is not a number.
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _require_columns(path: Path, names: list[str], mapping: dict[str, str]) -> None:
    missing = [column for column in mapping.values() if column not in names]
    if missing:
        raise UsageError(f"{path}: no column {missing[0]!r} (its columns: {', '.join(names) or 'none'}); map the"
                         " trace's columns under trace.columns")


def _check_text(path: Path, file_format: TraceFormat) -> None:
    try:
        with path.open("rb") as file:
            head = file.read(SNIFF_BYTES)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such trace file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if file_format != "parquet" and b"\0" in head:
        raise UsageError(f"{path}: a binary file, not {file_format.upper()} text (a Parquet trace is read by its"
                         " .parquet suffix or trace.format: parquet)")
    if not head.strip():
        raise UsageError(f"{path}: no rows (an empty trace)")


def _text(value: Any) -> str:
    """An optional column's value as the records keep it: a list as JSON, anything else as text."""
    if isinstance(value, list | tuple | np.ndarray):
        return json.dumps([int(v) if isinstance(v, int | np.integer) else v for v in value])
    return "" if value is None else str(value)


def _shown(number: float) -> str:
    return f"{number:g}" if math.isfinite(number) else "nothing"
