"""A run's tables, written once its load has stopped: records, tokens, telemetry, steps, Locust's.

Every owed request gets exactly one row: the ones no load user recorded (never sent,
or cut off in flight) are answered for here, with the reason (harness.driver.outcome).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from locust.env import Environment
from locust.html import get_html_report
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from harness.driver.journal import RunJournal
from harness.driver.outcome import LOST, NOT_SENT, Failure, unanswered_row
from harness.driver.steps import StepLogCursor
from harness.driver.work import WorkItem
from harness.rundir.accounting import row_problems
from harness.rundir.journal import JournalFiles
from harness.rundir.manifest import RunCounts
from harness.rundir.records import RECORDS_FILE, STEPS_FILE, TELEMETRY_FILE, TELEMETRY_SCHEMA
from harness.telemetry.metrics import TelemetrySample


@dataclass(frozen=True)
class StoppedLoad:
    """What a load leaves behind once stopped, for its tables: a single process's or a distributed run's."""

    # The journal that answers for unrecorded requests and writes the tables.
    journal: RunJournal
    # Every request id some process recorded a row for.
    recorded: set[int]
    # Ids handed to a load user (sent, or possibly sent): an unrecorded one is `lost`, the rest `not_sent`.
    handed_out: set[int]
    # A closed loop's requests its duration never reached.
    not_due: list[int]
    # Requests actually sent.
    sent: int
    # Who answers for unrecorded rows (the `worker` column).
    worker: str
    samples: list[TelemetrySample]
    environment: Environment
    # Other processes' journals to merge in (a distributed run's workers).
    sources: tuple[JournalFiles, ...] = ()


@dataclass(frozen=True)
class RunTables:
    """What the written tables hold, for the manifest and the run's outcome."""

    counts: RunCounts
    # Rows of requests that finished (ok or failed), not of those answered for.
    kept: int
    # What is wrong with the rows against the plan (harness.rundir.accounting); empty when they match.
    problems: list[str]


def write_tables(
    out_dir: Path, items: Sequence[WorkItem], load: StoppedLoad, steps: StepLogCursor | None, run_tag: str
) -> RunTables:
    """Write every table of the run directory from a stopped load; count what they hold.

    `steps`: the server's step log, from where it stood before the run (None: not recorded).
    """
    unanswered = _answer_for_the_rest(items, load)
    records_written, _ = load.journal.finalize(load.sources)
    telemetry = [asdict(sample) for sample in load.samples]
    pq.write_table(pa.Table.from_pylist(telemetry, schema=TELEMETRY_SCHEMA), out_dir / TELEMETRY_FILE)
    _write_locust_outputs(load.environment, out_dir)
    records = pq.read_table(out_dir / RECORDS_FILE).to_pylist()
    if steps is not None:
        finished = sum(1 for r in records if r["ok"])
        pq.write_table(steps.read_run(run_tag, finished), out_dir / STEPS_FILE)
    failures: dict[str, int] = {}
    for row in records:
        if not row["ok"]:
            failures[row["error_kind"]] = failures.get(row["error_kind"], 0) + 1
    counts = RunCounts(
        planned=len(items),
        not_due=len(load.not_due),
        sent=load.sent,
        ok=sum(r["ok"] for r in records),
        failed=sum(not r["ok"] for r in records),
        length_mismatch=sum(r["length_mismatch"] for r in records),
        inexact=sum(r["ok"] and not r["length_exact"] for r in records),
        unanswered=unanswered,
        failures=dict(sorted(failures.items())),
    )
    problems = row_problems((r["request_id"] for r in records), counts.planned, counts.not_due)
    return RunTables(counts, records_written - unanswered, problems)


def _answer_for_the_rest(items: Sequence[WorkItem], load: StoppedLoad) -> int:
    """Write a failed row for every owed request no load user recorded; return how many.

    After an interruption these are the requests never sent and those cut off in flight;
    in a run that ended normally, any here means a load user (or a worker) died without its row.
    """
    not_due = set(load.not_due)
    written = 0
    for item in items:
        if item.request_id in not_due or item.request_id in load.recorded:
            continue
        if item.request_id in load.handed_out:
            failure = Failure(LOST, "handed to a load user, which recorded no outcome (interrupted in flight?)")
        else:
            failure = Failure(NOT_SENT, "the run stopped before it was sent")
        load.journal.add(unanswered_row(item, load.worker, failure), [])
        written += 1
    return written


def _write_locust_outputs(environment: Environment, out_dir: Path) -> None:
    """Locust's own stats (CSV) and HTML report, for people used to them."""
    locust_dir = out_dir / "locust"
    locust_dir.mkdir(exist_ok=True)
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    with (locust_dir / "stats.csv").open("w", newline="") as handle:
        stats_csv.requests_csv(csv.writer(handle))
    with (locust_dir / "failures.csv").open("w", newline="") as handle:
        stats_csv.failures_csv(csv.writer(handle))
    (locust_dir / "report.html").write_text(get_html_report(environment, show_download_link=False))
