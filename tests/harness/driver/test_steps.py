"""Cutting a run's steps out of the engine's step log, and reading only what a run appended.

The cursor waits for the engine's last lines on simulated time (SteppedTime): the polls
asserted are exact, and no test sleeps.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable

from harness.driver import steps as steps_module
from harness.driver.steps import StepLogCursor, request_tag, run_steps
from harness.rundir.records import STEP_SCHEMA

TAG = "ab12cd34"
OTHER = "ffee0011"


def vllm_id(tag: str, request_id: int, suffix: str = "1f2e3d4c") -> str:
    """What vLLM makes of our X-Request-Id: cmpl-<header>-<choice>-<random>."""
    return f"cmpl-{request_tag(tag, request_id)}-0-{suffix}"


def line(t, *, admitted=(), finished=(), running=1, generated=1):
    """One step-log row with the keys launchers.engine.step_recorder writes."""
    return {
        "t": t, "end": t + 0.05, "running": running, "waiting": 2, "prefill": 10, "decode": 3,
        "context": 100, "prefill_pairs": 55, "generated": generated, "admitted": list(admitted),
        "finished": list(finished),
    }


WARMUP = "cmpl-9f8e7d6c5b4a39281706f5e4d3c2b1a0-0"

LOG = [
    line(1.0, admitted=[vllm_id(OTHER, 0)]),                        # 0: another run before ours
    line(2.0, admitted=[WARMUP], finished=[vllm_id(OTHER, 0)]),     # 1: warm-up, other run ends
    line(3.0, admitted=[vllm_id(TAG, 7), vllm_id(OTHER, 1), vllm_id(TAG, 8, "deadbeef")], running=3),  # 2: ours begin
    line(4.0, finished=[vllm_id(OTHER, 1), WARMUP]),                # 3: nothing of ours
    line(5.0, finished=[vllm_id(TAG, 7)], generated=2),             # 4
    line(6.0, admitted=[vllm_id(TAG, 12)], finished=[vllm_id(TAG, 8), vllm_id(OTHER, 2)]),  # 5
    line(7.0, finished=[vllm_id(TAG, 12)]),                         # 6: our last finish
    line(8.0, admitted=[vllm_id(OTHER, 3)], finished=[vllm_id(OTHER, 3)]),  # 7: after ours
]


def test_request_tag_is_what_run_steps_looks_for():
    assert request_tag(TAG, 7) == "bb-ab12cd34-7"
    vllm_id = "cmpl-bb-ab12cd34-7-0-1f2e3d4c"
    assert run_steps([line(0.0, admitted=[vllm_id], finished=[vllm_id])], TAG)[0]["admitted"] == [7]


def test_run_steps_keeps_first_admission_to_last_finish():
    steps = run_steps(LOG, TAG)
    assert [s["t_s"] for s in steps] == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_run_steps_maps_our_ids_and_ignores_others_and_warm_up():
    steps = run_steps(LOG, TAG)
    assert [s["admitted"] for s in steps] == [[7, 8], [], [], [12], []]
    assert [s["finished"] for s in steps] == [[], [], [7], [8], [12]]


def test_run_steps_renames_the_recorder_keys():
    first = run_steps(LOG, TAG)[0]
    assert first == {
        "t_s": 3.0, "end_s": 3.05, "running": 3, "waiting": 2, "prefill_tokens": 10, "decode_tokens": 3,
        "context_tokens": 100, "prefill_pairs": 55, "generated_tokens": 1, "admitted": [7, 8], "finished": [],
    }
    assert list(first) == STEP_SCHEMA.names


def test_a_step_log_from_before_prefill_pairs_has_them_unknown_not_zero():
    older = [{key: value for key, value in row.items() if key != "prefill_pairs"} for row in LOG]
    assert math.isnan(run_steps(older, TAG)[0]["prefill_pairs"])


def test_run_steps_of_the_other_tag():
    steps = run_steps(LOG, OTHER)
    assert [s["t_s"] for s in steps] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert steps[2]["admitted"] == [1] and steps[5]["finished"] == [2]


def test_a_tag_that_is_a_prefix_of_another_does_not_match_it():
    rows = [line(1.0, admitted=["cmpl-bb-ab12cd345-3-0-aa"], finished=["cmpl-bb-ab12cd345-3-0-aa"])]
    assert run_steps(rows, TAG) == []
    assert run_steps(rows, "ab12cd345")[0]["finished"] == [3]


def test_run_steps_is_empty_when_the_tag_never_appears():
    assert run_steps(LOG, "00000000") == []
    assert run_steps([], TAG) == []


def test_run_steps_is_empty_without_a_finish():
    assert run_steps(LOG[:4], TAG) == []  # ours admitted, none finished yet


def test_run_steps_tolerates_rows_without_id_lists():
    rows = [{k: v for k, v in line(1.0).items() if k not in ("admitted", "finished")}, *LOG]
    assert [s["t_s"] for s in run_steps(rows, TAG)] == [3.0, 4.0, 5.0, 6.0, 7.0]


class SteppedTime:
    """A monotonic clock that only the cursor's sleeps move; `meanwhile` runs during each sleep."""

    def __init__(self, meanwhile: Callable[[], None] = lambda: None, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []
        self._meanwhile = meanwhile

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self._meanwhile()


def cursor_on(log, time_: SteppedTime) -> StepLogCursor:
    return StepLogCursor(log, clock=time_, sleep=time_.sleep)


def write_lines(path, rows, *, mode="a"):
    with path.open(mode, encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def test_cursor_reads_only_lines_appended_after_it_was_created(tmp_path):
    log = tmp_path / "steps.jsonl"
    # An earlier run with the very same tag: its lines are before the cursor and must not be read.
    write_lines(log, [line(0.1, admitted=[vllm_id(TAG, 99)]), line(0.2, finished=[vllm_id(TAG, 99)])])
    cursor = StepLogCursor(log)
    write_lines(log, LOG)
    table = cursor.read_run(TAG, expected_finishes=3)
    assert table.schema == STEP_SCHEMA
    assert table.column("t_s").to_pylist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert table.column("finished").to_pylist() == [[], [], [7], [8], [12]]
    assert 99 not in [rid for ids in table.column("admitted").to_pylist() for rid in ids]


def test_cursor_skips_a_torn_last_line(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text("")
    cursor = StepLogCursor(log)
    write_lines(log, LOG)
    torn = json.dumps(line(9.0, finished=[vllm_id(TAG, 20)]))
    with log.open("a", encoding="utf-8") as handle:
        handle.write(torn[: len(torn) // 2])
    table = cursor.read_run(TAG, expected_finishes=3)
    assert table.num_rows == 5
    assert table.column("t_s").to_pylist()[-1] == 7.0


def test_cursor_created_in_the_middle_of_a_line_skips_its_tail(tmp_path):
    log = tmp_path / "steps.jsonl"
    half = json.dumps(line(0.5, admitted=[vllm_id(TAG, 1)]))
    log.write_text(half[:20])
    cursor = StepLogCursor(log)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(half[20:] + "\n")
    write_lines(log, LOG)
    assert cursor.read_run(TAG, expected_finishes=3).column("t_s").to_pylist() == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_cursor_on_a_log_that_does_not_exist_yet(tmp_path):
    log = tmp_path / "later.jsonl"
    cursor = cursor_on(log, SteppedTime())
    empty = cursor.read_run(TAG, expected_finishes=3)
    assert empty.num_rows == 0 and empty.schema == STEP_SCHEMA
    write_lines(log, LOG)  # the server creates it afterwards: everything in it is new
    assert cursor.read_run(TAG, expected_finishes=3).num_rows == 5


def test_cursor_gives_up_after_the_settle_timeout_with_what_it_has(tmp_path, monkeypatch):
    # Binary fractions, so the simulated instants add up exactly.
    monkeypatch.setattr(steps_module, "SETTLE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(steps_module, "SETTLE_POLL_S", 0.25)
    log = tmp_path / "steps.jsonl"
    log.write_text("")
    time_ = SteppedTime()
    cursor = cursor_on(log, time_)
    write_lines(log, LOG[:5])  # only request 7 has finished
    table = cursor.read_run(TAG, expected_finishes=3)
    # Looks at 0, 0.25, ..., 1.0 (not yet past the deadline), then once more at 1.25 and gives up.
    assert time_.slept == [0.25] * 5
    assert table.column("finished").to_pylist() == [[], [], [7]]


def test_cursor_waits_for_the_engine_last_lines(tmp_path):
    log = tmp_path / "steps.jsonl"
    log.write_text("")
    time_ = SteppedTime(meanwhile=lambda: write_lines(log, LOG[5:]))
    cursor = cursor_on(log, time_)
    write_lines(log, LOG[:5])
    table = cursor.read_run(TAG, expected_finishes=3)
    # The engine wrote its last lines during the first poll's sleep: one poll, then everything.
    assert time_.slept == [steps_module.SETTLE_POLL_S]
    assert table.column("finished").to_pylist() == [[], [], [7], [8], [12]]


def test_importing_steps_needs_no_gevent_patching():
    code = (
        "import sys, harness.driver.steps\n"
        "bad = [m for m in ('gevent', 'locust', 'vllm') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
