"""The pure parts of a distributed run: addresses, clock offsets, worst-case health, row shifting, merging."""

from __future__ import annotations

import math
import re

import pyarrow.parquet as pq
import pytest

from harness.driver.client_health import worst_case
from harness.driver.distributed.clock import Exchange, estimate_offset
from harness.driver.distributed.wire import is_loopback, item_from_wire, item_to_wire, parse_address
from harness.driver.journal import RunJournal, append_lines
from harness.driver.work import WorkItem
from harness.rundir.journal import JournalFiles
from harness.rundir.manifest import ClientHealth
from harness.rundir.records import RECORD_SCHEMA


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1", ("127.0.0.1", 5557)),
    ("localhost:6000", ("localhost", 6000)),
    ("[::1]:7000", ("::1", 7000)),
    ("[::1]", ("::1", 5557)),
])
def test_master_addresses_parse(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize(("text", "fragment"), [
    (":5557", "names no host"),
    ("127.0.0.1:0", "port must be a number from 1 to 65535"),
    ("127.0.0.1:http", "port must be a number"),
    ("[::1]x", "is not HOST[:PORT]"),
    ("no-such-host.invalid", "cannot resolve host"),
])
def test_bad_master_addresses_say_what_is_wrong(text, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_address(text)


def test_loopback_hosts_share_the_clock():
    assert is_loopback("127.0.0.1") and is_loopback("localhost")
    assert not is_loopback("no-such-host.invalid")


def test_the_offset_comes_from_the_shortest_round_trip():
    # The worker's clock runs 2.0 s ahead of the master's; trips of 10 ms and 2 ms, the
    # slow one asymmetric (its estimate is off by 4 ms), the fast one symmetric.
    slow = Exchange(asked_s=102.000, master_s=100.002, answered_s=102.010)
    fast = Exchange(asked_s=105.000, master_s=103.001, answered_s=105.002)
    estimate = estimate_offset([slow, fast])
    assert estimate.offset_s == pytest.approx(2.0) and estimate.round_trip_s == pytest.approx(0.002)
    assert estimate_offset([slow]).offset_s == pytest.approx(2.003)
    with pytest.raises(ValueError):
        estimate_offset([])


def test_worst_case_health_takes_each_figure_from_the_worst_process():
    calm = ClientHealth(cpu_share=0.95, loop_lag_p99_s=0.001, loop_lag_max_s=0.002, loop_lag_probes=100)
    lagging = ClientHealth(cpu_share=0.30, loop_lag_p99_s=0.050, loop_lag_max_s=0.200, loop_lag_probes=90)
    combined = worst_case([calm, lagging])
    assert combined == ClientHealth(cpu_share=0.95, loop_lag_p99_s=0.050, loop_lag_max_s=0.200, loop_lag_probes=190)
    assert worst_case([calm]) == calm
    with pytest.raises(ValueError):
        worst_case([])


def test_work_items_cross_the_wire_unchanged():
    for item in (WorkItem(3, "hello", 8, 10, 12, 1, None), WorkItem(4, "é", 8, 10, 10, -1, 0.25)):
        assert item_from_wire(item_to_wire(item)) == item


def record(request_id: int, worker: str, sent: float) -> dict:
    return {
        "request_id": request_id, "worker": worker, "planned_prompt_tokens": 8, "planned_output_tokens": 2,
        "requested_output_tokens": 2, "wave": -1, "scheduled_s": sent, "sent_s": sent, "lateness_s": 0.0,
        "first_token_s": sent + 0.1, "end_s": sent + 0.2, "prompt_tokens": 8, "completion_tokens": 2,
        "usage_completion_tokens": 2, "status": 200, "error_kind": "", "error": "", "ok": True,
        "length_mismatch": False,
    }


def test_workers_rows_merge_into_the_one_process_tables(tmp_path):
    """Two workers' lines, as their sinks hand them over, and the master's own row: one pair of tables."""
    sent: dict[str, list[tuple[list[str], list[str]]]] = {"a": [], "b": []}
    workers = {name: RunJournal(None, flush_interval_s=60, sink=lambda r, t, name=name: sent[name].append((r, t)))
               for name in sent}
    workers["a"].add(record(2, "a", 10.0), [10.1, 10.2])
    workers["b"].add(record(1, "b", 10.5), [10.6, 10.6])
    workers["a"].add(record(0, "a", 11.0), [11.1, 11.2])
    sources = []
    for name, journal in workers.items():
        journal.flush()
        files = JournalFiles(tmp_path / f"records-{name}.jsonl", tmp_path / f"tokens-{name}.jsonl")
        for records, tokens in sent[name]:
            append_lines(files, records, tokens)
        sources.append(files)
    master = RunJournal(tmp_path)
    master.add(record(3, "m", math.nan), [])
    assert master.finalize(sources) == (4, 6)
    records = pq.read_table(tmp_path / "records.parquet")
    assert records.schema.equals(RECORD_SCHEMA, check_metadata=False)
    assert records.column("request_id").to_pylist() == [0, 1, 2, 3]
    assert records.column("worker").to_pylist() == ["a", "b", "a", "m"]
    tokens = pq.read_table(tmp_path / "tokens.parquet").to_pylist()
    assert sorted((t["request_id"], t["token_index"], t["t_s"]) for t in tokens) == [
        (0, 0, 11.1), (0, 1, 11.2), (1, 0, 10.6), (1, 1, 10.6), (2, 0, 10.1), (2, 1, 10.2)]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["records.parquet", "tokens.parquet"]


def test_a_journal_without_a_directory_needs_a_sink():
    with pytest.raises(ValueError):
        RunJournal(None)
