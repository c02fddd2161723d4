"""Reading a finished run directory: the analyzer's only I/O.

`load_run` refuses anything that is not a finished run (no manifest, a missing or
malformed table) with a one-line `UsageError` naming the path, so the pure analysis
never sees half-written data. It also refuses a run that does not answer for its plan
(interrupted, no plan.json, rows missing or repeated, failed requests) unless told
`allow_partial`; the run then carries the reasons in `partial`, for the report to say.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from harness.errors import UsageError
from harness.rundir.accounting import row_problems
from harness.rundir.journal import JournalFiles, journal_tables
from harness.rundir.manifest import RunManifest, read_manifest
from harness.rundir.records import (
    GPU_FILE,
    GPU_SCHEMA,
    MANIFEST_FILE,
    PLAN_FILE,
    RECORD_SCHEMA,
    RECORDS_FILE,
    STEP_SCHEMA,
    STEPS_FILE,
    TELEMETRY_FILE,
    TELEMETRY_SCHEMA,
    TOKEN_SCHEMA,
    TOKENS_FILE,
)
from harness.validation import describe_validation_error


@dataclass(frozen=True, eq=False)
class RunData:
    """Everything one finished run directory holds."""

    path: Path
    manifest: RunManifest
    records: pd.DataFrame
    tokens: pd.DataFrame
    telemetry: pd.DataFrame
    plan: dict[str, Any] | None
    # The engine's own step log (records.STEP_FIELDS); None for servers we did not launch.
    steps: pd.DataFrame | None = None
    # NVML samples of the server's GPUs (records.GPU_FIELDS); None without a GPU (the manifest says why).
    gpu: pd.DataFrame | None = None
    # Why the run does not answer for its plan (see load_run); empty for a whole run.
    partial: tuple[str, ...] = ()


# Columns added after runs were first recorded, and what an older run's rows mean by them
# (a function of the rows where that depends on them).
RECORD_DEFAULTS: dict[str, Any] = {
    "usage_completion_tokens": -1,
    "error_kind": "",
    # Older runs all asked vLLM's way and counted token ids: forced, not re-tokenised, exact when ok.
    "length_forced": True,
    "retokenized_completion_tokens": -1,
    "length_exact": lambda rows: rows["ok"],
    # Before traces: no row came from one.
    "trace_row": -1,
    "session": "",
    "hash_ids": "",
    "label": "",
    # Before conversations: no row was a turn.
    "turn": -1,
    "after": -1,
    "think_s": 0.0,
}


# Step columns added after step logs were first recorded: not known in an older run's steps.
STEP_DEFAULTS: dict[str, Any] = {"prefill_pairs": float("nan")}


def load_run(path: str | os.PathLike[str], allow_partial: bool = False) -> RunData:
    """Load the run directory at `path`; UsageError (naming it) if it is not a finished run,
    or if it does not answer for its plan and `allow_partial` is false."""
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"{root}: not a run directory (no such directory)")
    manifest_path = root / MANIFEST_FILE
    if not manifest_path.is_file():
        raise UsageError(f"{root}: not a run directory (no {MANIFEST_FILE})")
    manifest = _read_manifest(manifest_path)
    killed = not (root / RECORDS_FILE).is_file() and bool(JournalFiles.all_in(root))
    if killed:
        records, tokens = _journal_frames(root)
    else:
        records = _read_table(root / RECORDS_FILE, RECORD_SCHEMA, defaults=RECORD_DEFAULTS)
        tokens = _read_table(root / TOKENS_FILE, TOKEN_SCHEMA)
    plan = _read_optional_json(root / PLAN_FILE)
    partial = tuple(([f"killed before it wrote its tables ({len(records)} rows read from its journals)"]
                     if killed else []) + plan_problems(manifest, records, plan))
    if partial and not allow_partial:
        raise UsageError(f"{root}: {'; '.join(partial)} (--allow-partial to analyse it anyway)")
    gpu_sampled = manifest.gpu_telemetry is not None and bool(manifest.gpu_telemetry.devices)
    # Older runs polled no prefix-cache counters: NaN, not "no hits".
    telemetry_defaults = {"latency_s": float("nan"), "prefix_cache_queries_total": float("nan"),
                          "prefix_cache_hits_total": float("nan")}
    return RunData(
        path=root,
        manifest=manifest,
        records=records,
        tokens=tokens,
        # A killed run wrote no telemetry table: its polls died with it.
        telemetry=(_empty(TELEMETRY_SCHEMA) if killed and not (root / TELEMETRY_FILE).is_file()
                   else _read_table(root / TELEMETRY_FILE, TELEMETRY_SCHEMA, defaults=telemetry_defaults)),
        plan=plan,
        steps=_read_table(root / STEPS_FILE, STEP_SCHEMA, defaults=STEP_DEFAULTS) if manifest.engine_steps else None,
        gpu=_read_table(root / GPU_FILE, GPU_SCHEMA) if gpu_sampled else None,
        partial=partial,
    )


def _journal_frames(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The records and tokens of a run killed before it wrote its tables, from the journals it left."""
    try:
        records, tokens = journal_tables(JournalFiles.all_in(root))
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        raise UsageError(f"{root}: its journals cannot be read ({' '.join(str(exc).split())})") from exc
    return _frame(records, RECORD_SCHEMA, RECORD_DEFAULTS), _frame(tokens, TOKEN_SCHEMA, {})


def _empty(schema: pa.Schema) -> pd.DataFrame:
    frame: pd.DataFrame = schema.empty_table().to_pandas()
    return frame


def plan_problems(manifest: RunManifest, records: pd.DataFrame, plan: dict[str, Any] | None) -> list[str]:
    """Why a run's rows do not answer for its plan: each a short clause; empty when they do."""
    problems = []
    if not manifest.complete:
        problems.append(f"run did not finish ({MANIFEST_FILE} says complete: false)")
    requests = plan.get("requests") if plan is not None else None
    if not isinstance(requests, list):
        problems.append(f"no usable {PLAN_FILE} to check its rows against")
    else:
        problems += row_problems(records["request_id"], len(requests), manifest.counts.not_due)
    failed = records.loc[~records["ok"]]
    if len(failed):
        kinds = failed["error_kind"].replace("", "unknown").value_counts().sort_index()
        problems.append(
            f"{len(failed)} of {len(records)} requests failed ({', '.join(f'{n} {kind}' for kind, n in kinds.items())})"
        )
    return problems


def _read_manifest(path: Path) -> RunManifest:
    try:
        return read_manifest(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        raise UsageError(f"{path}: {describe_validation_error(exc)}") from exc
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from exc


def _read_table(path: Path, schema: pa.Schema, defaults: dict[str, Any] | None = None) -> pd.DataFrame:
    """Read a parquet table, requiring every column of `schema` but those in `defaults` (filled if absent:
    a value, or a function of the frame read)."""
    defaults = defaults or {}
    if not path.is_file():
        raise UsageError(f"{path}: missing (a finished run has {path.name})")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"{path}: cannot read parquet: {' '.join(str(exc).split())}") from exc
    missing = [name for name in schema.names if name not in table.column_names and name not in defaults]
    if missing:
        raise UsageError(f"{path}: missing columns {', '.join(missing)}")
    return _frame(table, schema, defaults)


def _frame(table: pa.Table, schema: pa.Schema, defaults: dict[str, Any]) -> pd.DataFrame:
    """`table`'s columns of `schema` as a frame, those absent filled from `defaults`."""
    frame: pd.DataFrame = table.select([name for name in schema.names if name in table.column_names]).to_pandas()
    for name, value in defaults.items():
        if name not in frame.columns:
            frame[name] = value(frame) if callable(value) else value
    return frame


def _read_optional_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def find_run_dirs(paths: Sequence[Path]) -> list[Path]:
    """The run directories `paths` name: runs themselves, a sweep's runs/ directory, or a
    report directory (reproduce, nightly) holding runs/. UsageError when one is not a
    directory or none holds a run.
    """
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"not a directory: {path}")
        if (path / MANIFEST_FILE).exists():
            found.append(path)
            continue
        inside = path / "runs" if (path / "runs").is_dir() else path
        found += sorted(p for p in inside.iterdir() if (p / MANIFEST_FILE).exists())
    if not found:
        raise UsageError(f"no run directories (with {MANIFEST_FILE}) in {', '.join(map(str, paths))}")
    return found
