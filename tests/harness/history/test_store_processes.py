"""The store across processes: a writer killed mid-append, and two writers at once.

Children are forked (multiprocessing's "fork" context) so they can run closures over
the test's row factory; each opens its own connections, as the store always does.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time
from contextlib import closing

import pytest

from harness.history import HistoryStore

FORK = multiprocessing.get_context("fork")
# Enough rows that the open transaction spills pages into the WAL file before the kill.
ROWS_BEFORE_KILL = 20_000


def test_a_writer_killed_mid_append_leaves_none_of_its_rows(tmp_path, make_repetition):
    path = tmp_path / "h.sqlite"
    store = HistoryStore(path)
    store.append([make_repetition(invocation_id="committed")] * 3)
    template = make_repetition(invocation_id="killed")
    halfway = FORK.Event()

    def append_then_hang():
        def rows():
            for i in range(2 * ROWS_BEFORE_KILL):
                if i == ROWS_BEFORE_KILL:
                    # Every row so far is inserted, none committed: the parent kills us here.
                    halfway.set()
                    time.sleep(600)
                yield template
        HistoryStore(path).append(rows())

    child = FORK.Process(target=append_then_hang)
    child.start()
    try:
        assert halfway.wait(timeout=120), "the child never reached the middle of its append"
        # The transaction is open: the write lock is held, the WAL holds its pages, readers see none of them.
        with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other, \
                pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        assert os.path.getsize(f"{path}-wal") > 0
        assert store.frame(invocation_id="killed").empty
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL

    assert list(store.frame()["invocation_id"]) == ["committed"] * 3
    # The dead writer's lock died with it: the next append goes through at once.
    assert HistoryStore(path).append([make_repetition(invocation_id="after")] * 2) == 2
    assert list(store.frame()["invocation_id"]) == ["committed"] * 3 + ["after"] * 2


def test_two_writers_at_once_both_land_every_row(tmp_path, make_repetition):
    path = tmp_path / "h.sqlite"  # not created yet: both children race to create it too
    go = FORK.Barrier(2)
    wrote = {"writer-a": FORK.Event(), "writer-b": FORK.Event()}

    def write(invocation_id, other):
        go.wait(timeout=60)
        for i in range(100):
            if i == 50:
                # Halfway, each waits (between transactions) until the other has written:
                # their appends surely overlap, however the two were scheduled.
                assert wrote[other].wait(timeout=120)
            HistoryStore(path).append([make_repetition(invocation_id=invocation_id, run_dir=f"{invocation_id}/{i}/{j}")
                                       for j in range(2)])
            wrote[invocation_id].set()

    writers = [FORK.Process(target=write, args=("writer-a", "writer-b")),
               FORK.Process(target=write, args=("writer-b", "writer-a"))]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=300)
    assert [writer.exitcode for writer in writers] == [0, 0]
    frame = HistoryStore(path).frame()
    assert frame["invocation_id"].value_counts().to_dict() == {"writer-a": 200, "writer-b": 200}
    assert frame["run_dir"].is_unique
    # Rows in commit order (one timestamp, so by id): each writer's rows began before the other's ended.
    order = list(frame["invocation_id"])
    last = {name: len(order) - 1 - order[::-1].index(name) for name in wrote}
    assert order.index("writer-a") < last["writer-b"] and order.index("writer-b") < last["writer-a"]


def test_processes_opening_a_new_store_together_all_succeed(tmp_path):
    # SQLite refuses the switch to WAL at once, without its busy timeout, while another
    # process holds a lock: two processes creating one store raced into "database is
    # locked" in about 8% of such openings before the store waited it out.
    def open_store(path, go, failures):
        go.wait(timeout=60)
        try:
            HistoryStore(path)
        except Exception as exc:
            failures.put(repr(exc))

    failures = FORK.Queue()
    for attempt in range(60):
        go = FORK.Barrier(2)
        openers = [FORK.Process(target=open_store, args=(tmp_path / f"h{attempt}.sqlite", go, failures))
                   for _ in range(2)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(timeout=120)
        assert [opener.exitcode for opener in openers] == [0, 0]
    assert failures.empty()
