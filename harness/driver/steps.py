"""The engine's step log (launchers.engine.step_recorder) cut down to one run: steps.parquet.

A launched server appends one JSON line per engine step to its step log for as long
as it lives. A run notes the log's size when it starts; afterwards it reads what
was appended since, keeps the steps between the first admission and the last
finish of its own requests, and maps vLLM's request ids back to the plan's through
the `X-Request-Id` the user sent (`request_tag`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.rundir.records import STEP_SCHEMA

# How long to wait for the engine's last lines: it writes them before it sends the last token.
SETTLE_TIMEOUT_S = 2.0
SETTLE_POLL_S = 0.1  # how often it looks again meanwhile


def request_tag(run_tag: str, request_id: int) -> str:
    """The X-Request-Id for one request; vLLM keeps it inside its own request id."""
    return f"bb-{run_tag}-{request_id}"


def cache_scope(run_tag: str) -> str:
    """The prefix-cache scope of one run's requests: theirs alone (harness.driver.backends)."""
    return f"bb-{run_tag}" if run_tag else ""


class StepLogCursor:
    """Where a run's steps begin in a server's step log.

    `clock` (monotonic seconds) and `sleep` time the wait for the engine's last lines:
    by default time.monotonic and time.sleep (gevent's, in a patched process). Tests
    pass a simulated pair.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self._clock = clock
        # Looked up per cursor, not at import: in a gevent-patched process this is gevent's sleep.
        self._sleep = sleep if sleep is not None else time.sleep

    def read_run(self, run_tag: str, expected_finishes: int) -> pa.Table:
        """This run's steps as a STEP_SCHEMA table (waits briefly for the engine's last lines)."""
        deadline = self._clock() + SETTLE_TIMEOUT_S
        while True:
            rows = self.appended()
            steps = run_steps(rows, run_tag)
            finished = sum(len(step["finished"]) for step in steps)
            if finished >= expected_finishes or self._clock() > deadline:
                return pa.Table.from_pylist(steps, schema=STEP_SCHEMA)
            self._sleep(SETTLE_POLL_S)

    def appended(self) -> list[dict[str, Any]]:
        """Every step line appended since the cursor was made, as the engine wrote it."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        rows = []
        for line in data.decode(errors="replace").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line being written right now
        return rows


def run_steps(rows: list[dict[str, Any]], run_tag: str) -> list[dict[str, Any]]:
    """Steps from the first admission to the last finish of `run_tag`'s requests, ids mapped."""
    pattern = re.compile(rf"bb-{re.escape(run_tag)}-(\d+)")

    def ours(ids: list[str]) -> list[int]:
        return [int(match.group(1)) for rid in ids if (match := pattern.search(rid))]

    mapped = [(row, ours(row.get("admitted", [])), ours(row.get("finished", []))) for row in rows]
    first = next((i for i, (_, admitted, _) in enumerate(mapped) if admitted), None)
    last = max((i for i, (_, _, finished) in enumerate(mapped) if finished), default=None)
    if first is None or last is None or last < first:
        return []
    return [step_record(row, admitted, finished) for row, admitted, finished in mapped[first : last + 1]]


def step_record(row: dict[str, Any], admitted: list[Any], finished: list[Any]) -> dict[str, Any]:
    """One step-log line in records.STEP_FIELDS' names, with the request ids given."""
    return {
        "t_s": row["t"],
        "end_s": row["end"],
        "running": row["running"],
        "waiting": row["waiting"],
        "prefill_tokens": row["prefill"],
        "decode_tokens": row["decode"],
        "context_tokens": row["context"],
        # Step logs of engines from before the column: unknown, not none.
        "prefill_pairs": row.get("prefill_pairs", float("nan")),
        "generated_tokens": row["generated"],
        "admitted": admitted,
        "finished": finished,
    }
