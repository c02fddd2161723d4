"""Reading a finished run directory: the analyzer's only I/O.

`load_run` refuses anything that is not a finished run (no manifest, `complete` false,
a missing or malformed table) with a one-line `UsageError` naming the path, so the
pure analysis never sees half-written data.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from harness.errors import UsageError
from harness.manifest import RunManifest
from harness.records import (
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


def load_run(path: str | os.PathLike[str]) -> RunData:
    """Load the run directory at `path`; UsageError (naming it) if it is not a finished run."""
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"{root}: not a run directory (no such directory)")
    manifest_path = root / MANIFEST_FILE
    if not manifest_path.is_file():
        raise UsageError(f"{root}: not a run directory (no {MANIFEST_FILE})")
    manifest = _read_manifest(manifest_path)
    if not manifest.complete:
        raise UsageError(f"{root}: run did not finish ({MANIFEST_FILE} says complete: false)")
    return RunData(
        path=root,
        manifest=manifest,
        records=_read_table(root / RECORDS_FILE, RECORD_SCHEMA),
        tokens=_read_table(root / TOKENS_FILE, TOKEN_SCHEMA),
        telemetry=_read_table(root / TELEMETRY_FILE, TELEMETRY_SCHEMA, optional=("latency_s",)),
        plan=_read_optional_json(root / PLAN_FILE),
        steps=_read_table(root / STEPS_FILE, STEP_SCHEMA) if manifest.engine_steps else None,
    )


def _read_manifest(path: Path) -> RunManifest:
    try:
        return RunManifest.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        raise UsageError(f"{path}: {describe_validation_error(exc)}") from exc


def _read_table(path: Path, schema: pa.Schema, optional: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read a parquet table, requiring every column of `schema` but the `optional` ones (NaN if absent)."""
    if not path.is_file():
        raise UsageError(f"{path}: missing (a finished run has {path.name})")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"{path}: cannot read parquet: {' '.join(str(exc).split())}") from exc
    missing = [name for name in schema.names if name not in table.column_names and name not in optional]
    if missing:
        raise UsageError(f"{path}: missing columns {', '.join(missing)}")
    frame: pd.DataFrame = table.select([name for name in schema.names if name in table.column_names]).to_pandas()
    for name in optional:
        if name not in frame.columns:
            frame[name] = float("nan")
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
