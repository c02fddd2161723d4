"""The step recorder and static admission under every call order vLLM's engine core uses.

vLLM's real scheduler classes, ours on top, are driven as the engine core drives them
(tests/launchers/scheduler_drive.py): synchronously (CPU), and with a batch queue of 2
(async scheduling: every GPU run) and of 4 (pipeline parallelism), where schedule() for
the next steps runs before update_from_output() for the current one. The expected shape
of every row is computed here from the requests' lengths and the rows that admitted
them, so a row carrying another step's shape, a lost step or a doubled one fails.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from launchers.engine.engine_env import BATCH_WAIT_ENV, STEP_LOG_ENV
from launchers.engine.static_scheduler import AsyncStaticBatchScheduler, StaticBatchScheduler
from launchers.engine.step_recorder import AsyncRecordingScheduler, RecordingScheduler
from launchers.models import TINY, prepare_profile

# Tests are not a package (importlib import mode): the driver is loaded by path.
_spec = importlib.util.spec_from_file_location("scheduler_drive", Path(__file__).with_name("scheduler_drive.py"))
assert _spec is not None and _spec.loader is not None
drive = sys.modules.setdefault("scheduler_drive", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(drive)

CONTINUOUS = (RecordingScheduler, AsyncRecordingScheduler)
STATIC = (StaticBatchScheduler, AsyncStaticBatchScheduler)
DEPTHS = (1, 2, 4)
# (prompt tokens, output tokens): six requests for four slots, lengths all different.
REQUESTS = [(10, 2), (12, 3), (14, 5), (16, 8), (11, 4), (13, 6)]
# How much earlier than its schedule() call's decision a step's start may be stamped
# (launchers/engine/step_recorder.py).
STAMP_LEAD_S = 0.005


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    return prepare_profile(TINY)


@pytest.fixture
def engine(tiny_dir, tmp_path, monkeypatch):
    """Make a DrivenEngine recording to a fresh step log."""
    step_log = tmp_path / "steps.jsonl"
    monkeypatch.setenv(STEP_LOG_ENV, str(step_log))

    def make(cls: type, depth: int, *, max_num_seqs: int = 4, num_blocks: int = 1000, budget: int = 2048):
        config = drive.vllm_config(tiny_dir, max_num_seqs, num_blocks, budget)
        return drive.DrivenEngine(cls, config, depth, step_log)

    return make


def ids(requests: list[tuple[int, int]]) -> list[str]:
    return [f"r{i}" for i in range(len(requests))]


def run(engine, requests: list[tuple[int, int]], max_iterations: int = 10_000) -> list[dict[str, Any]]:
    for request_id, (prompt, output) in zip(ids(requests), requests, strict=True):
        engine.add(request_id, prompt, output)
    return engine.run(max_iterations)


def rows_with(rows: list[dict[str, Any]], key: str, request_id: str) -> list[int]:
    return [index for index, row in enumerate(rows) if request_id in row[key]]


def spans(rows: list[dict[str, Any]], requests: list[tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """(admission row, finish row) of each request, each exactly once."""
    result = {}
    for request_id in ids(requests):
        admitted, finished = rows_with(rows, "admitted", request_id), rows_with(rows, "finished", request_id)
        assert len(admitted) == 1 and len(finished) == 1, (request_id, admitted, finished)
        result[request_id] = (admitted[0], finished[0])
    return result


SHAPE = ("running", "waiting", "prefill", "decode", "context", "prefill_pairs", "generated")


def expected_shape(requests: list[tuple[int, int]], span: dict[str, tuple[int, int]], row: int) -> dict[str, int]:
    """What step `row` must hold: each request prefills its prompt when admitted, then decodes one token a step."""
    shape = Counter[str]()
    for request_id, (prompt, _) in zip(ids(requests), requests, strict=True):
        admitted, finished = span[request_id]
        if admitted > row:
            shape["waiting"] += 1
        elif row <= finished:
            shape["running"] += 1
            shape["generated"] += 1
            shape["context"] += prompt + row - admitted
            shape["prefill" if row == admitted else "decode"] += prompt if row == admitted else 1
            shape["prefill_pairs"] += prompt * (prompt + 1) // 2 if row == admitted else 0
    return {key: shape[key] for key in SHAPE}


def assert_in_step_order(rows: list[dict[str, Any]], depth: int) -> None:
    starts, ends = [row["t"] for row in rows], [row["end"] for row in rows]
    assert starts == sorted(starts) and ends == sorted(ends)
    if depth == 1:
        assert all(start >= end for start, end in zip(starts[1:], ends, strict=False))


def assert_rows_are_the_steps(driven, rows: list[dict[str, Any]]) -> None:
    """One row per executed step, in order, each with that step's own shape, admissions and finishes."""
    assert len(rows) == driven.scheduled_steps == len(driven.truth)
    assert_in_step_order(rows, driven.depth)
    for index, (row, truth) in enumerate(zip(rows, driven.truth, strict=True)):
        recorded = {key: row[key] for key in truth}
        recorded["admitted"] = sorted(recorded["admitted"])
        assert recorded == truth, index


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("cls", CONTINUOUS + STATIC, ids=lambda c: c.__name__)
def test_one_row_per_step_with_its_own_shape(engine, cls, depth):
    driven = engine(cls, depth)
    rows = run(driven, REQUESTS)
    assert_rows_are_the_steps(driven, rows)


# A batch queue deeper than 2 schedules past a request's last token: those steps carry it
# (the engine computes it) and its dropped token is not counted as generated.
@pytest.mark.parametrize("depth", (1, 2))
@pytest.mark.parametrize("cls", CONTINUOUS + STATIC, ids=lambda c: c.__name__)
def test_rows_follow_from_the_requests_lengths(engine, cls, depth):
    rows = run(engine(cls, depth), REQUESTS)
    span = spans(rows, REQUESTS)
    for request_id, (_, output) in zip(ids(REQUESTS), REQUESTS, strict=True):
        admitted, finished = span[request_id]
        assert finished - admitted == output - 1, request_id
    for index, row in enumerate(rows):
        shape = {key: row[key] for key in SHAPE}
        assert shape == expected_shape(REQUESTS, span, index), index
    assert sum(row["generated"] for row in rows) == sum(output for _, output in REQUESTS)


def test_async_order_keeps_the_first_step(engine):
    """Four steps in the async order, the first admitting four requests: four rows, the first with them."""
    driven = engine(AsyncRecordingScheduler, depth=2)
    rows = run(driven, [(10, 4)] * 4)
    assert len(rows) == 4
    assert rows[0]["admitted"] == ["r0", "r1", "r2", "r3"]
    assert (rows[0]["prefill"], rows[0]["decode"], rows[0]["context"]) == (40, 0, 40)
    assert [row["context"] for row in rows] == [40, 44, 48, 52]
    assert rows[3]["finished"] == ["r0", "r1", "r2", "r3"]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("cls", CONTINUOUS, ids=lambda c: c.__name__)
def test_continuous_refills_a_freed_slot_at_once(engine, cls, depth):
    rows = run(engine(cls, depth), REQUESTS)
    span = spans(rows, REQUESTS)
    finishes = sorted(finished for _, finished in span.values())
    # The fifth and sixth requests take the slots freed by the first two finishes.
    for late, freed in zip(("r4", "r5"), finishes[:2], strict=True):
        assert 1 <= span[late][0] - freed <= depth, (late, span[late], freed)


def assert_static(rows: list[dict[str, Any]], batches: list[set[str]], depth: int) -> None:
    """Each batch is admitted only when the previous one has fully finished, and within `depth` steps of it."""
    last_finish = -1
    for batch in batches:
        admissions = [index for request_id in batch for index in rows_with(rows, "admitted", request_id)]
        first_admission = min(admissions)
        assert first_admission > last_finish
        assert first_admission - last_finish <= (depth if last_finish >= 0 else 1)
        for index in range(first_admission, max(admissions) + 1):
            assert set(rows[index]["admitted"]) <= batch, (index, rows[index]["admitted"], batch)
        last_finish = max(index for request_id in batch for index in rows_with(rows, "finished", request_id))


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("cls", STATIC, ids=lambda c: c.__name__)
def test_static_admits_only_when_the_batch_has_drained(engine, cls, depth):
    rows = run(engine(cls, depth), REQUESTS)
    assert_static(rows, [{"r0", "r1", "r2", "r3"}, {"r4", "r5"}], depth)
    # While the batch's longest member runs alone, the other two wait outside (a deeper queue
    # also carries finished members for a few steps, see above).
    assert [row["waiting"] for row in rows[:8]] == [2] * 8
    if depth <= 2:
        assert [row["running"] for row in rows[5:8]] == [1, 1, 1]


@pytest.mark.parametrize("depth", (1, 2))
@pytest.mark.parametrize("cls", STATIC, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("count", "waits"), [(4, False), (3, True)], ids=["full", "short"])
def test_static_waits_for_a_full_batch_up_to_its_max_batch_delay(engine, monkeypatch, cls, depth, count, waits):
    # B requests waiting form a batch at once, as a burst's first batch does; fewer form one
    # only once the oldest has waited the delay, with everyone waiting by then.
    monkeypatch.setenv(BATCH_WAIT_ENV, "0.3")
    driven = engine(cls, depth)
    arrived = time.time()
    rows = run(driven, REQUESTS[:count], max_iterations=10_000_000)
    assert set(rows[0]["admitted"]) == set(ids(REQUESTS[:count]))
    # A step's "t" is stamped just before its schedule() call decides; CI once saw it 14 us before the delay was up.
    assert (rows[0]["t"] - arrived >= 0.3 - STAMP_LEAD_S) is waits


PREEMPTING = [(32, 60)] * 4 + [(32, 10)] * 2


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("cls", CONTINUOUS + STATIC, ids=lambda c: c.__name__)
def test_preempted_requests_are_resumed_and_recorded(engine, cls, depth):
    # 14 blocks of 16 tokens cannot hold four requests of 32 + 60 tokens (6 blocks each).
    driven = engine(cls, depth, num_blocks=14)
    rows = run(driven, PREEMPTING)
    assert_rows_are_the_steps(driven, rows)
    admissions = Counter(request_id for row in rows for request_id in row["admitted"])
    resumed = [request_id for request_id, count in admissions.items() if count > 1]
    assert resumed, "the KV cache was meant to force a preemption"
    for request_id in ids(PREEMPTING):
        assert len(rows_with(rows, "finished", request_id)) == 1, request_id
    for request_id in resumed:
        resume_row = rows[rows_with(rows, "admitted", request_id)[1]]
        assert resume_row["prefill"] >= 32  # the prompt is computed again
    if cls in STATIC:
        assert_static(rows, [{"r0", "r1", "r2", "r3"}, {"r4", "r5"}], depth)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("cls", CONTINUOUS + STATIC, ids=lambda c: c.__name__)
def test_request_aborted_mid_batch_finishes_once(engine, cls, depth):
    driven = engine(cls, depth)
    # r3 (8 tokens) is aborted after the third update, while the batch runs.
    driven.abort_before_update = {3: ["r3"]}
    rows = run(driven, REQUESTS)
    assert_rows_are_the_steps(driven, rows)
    aborted_at = rows_with(rows, "finished", "r3")
    assert len(aborted_at) == 1 and aborted_at[0] <= 3 + depth, aborted_at
    for request_id in ("r0", "r1", "r2", "r4", "r5"):
        assert len(rows_with(rows, "finished", request_id)) == 1, request_id
    if cls in STATIC:
        # The abort shortens the batch: the next one follows r2 (5 tokens), not r3 (8).
        assert_static(rows, [{"r0", "r1", "r2", "r3"}, {"r4", "r5"}], depth)
        assert rows_with(rows, "admitted", "r4")[0] <= rows_with(rows, "finished", "r2")[0] + depth
