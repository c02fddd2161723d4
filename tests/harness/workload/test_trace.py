"""Trace workloads: each preset read from a file in its real column layout, the replay's options, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.driver.work import build_work
from harness.errors import UsageError
from harness.workload import build_plan, load_spec
from harness.workload.prefixes import planned_reuse
from harness.workload.synthetic_trace import SyntheticTrace, generate, write_trace

AZURE_ROWS = """\
TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.1805900,396,109
2023-11-16 18:15:50.1805900,879,20
2023-11-16 18:16:06.6805900,91,7
"""


def workload(tmp_path, trace: dict, **extra) -> Path:
    path = tmp_path / "trace.yaml"
    path.write_text(json.dumps({"name": "t", "seed": 3, "trace": trace, **extra}))
    return path


def plan_of(tmp_path, trace: dict, **extra):
    return build_plan(load_spec(workload(tmp_path, trace, **extra)))


def refused(tmp_path, trace: dict, **extra) -> str:
    with pytest.raises(UsageError) as raised:
        plan_of(tmp_path, trace, **extra)
    return str(raised.value)


def test_the_azure_preset_reads_its_real_layout_with_absolute_times(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE_ROWS)
    plan = plan_of(tmp_path, {"path": "azure.csv", "preset": "azure"})
    assert plan.arrival == "trace"
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.trace_row) for r in plan.requests] == [
        (0.0, 374, 44, 0), (3.5, 396, 109, 1), (3.5, 879, 20, 2), (20.0, 91, 7, 3)]


def test_the_mooncake_preset_reads_its_real_layout_and_keeps_the_hash_ids(tmp_path):
    rows = [{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]},
            {"timestamp": 27482, "input_length": 1200, "output_length": 9, "hash_ids": [46, 49]}]
    (tmp_path / "mooncake.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    plan = plan_of(tmp_path, {"path": "mooncake.jsonl", "preset": "mooncake", "time_scale": 2})
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.hash_ids) for r in plan.requests] == [
        (0.0, 6955, 52, "[46, 47, 48]"), (13.741, 1200, 9, "[46, 49]")]


def test_block_tokens_make_the_plan_build_prompts_from_the_hash_ids(tmp_path):
    rows = [{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [46, 47]},
            {"timestamp": 10, "input_length": 700, "output_length": 5, "hash_ids": [46, 49]}]
    (tmp_path / "mooncake.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    plan = plan_of(tmp_path, {"path": "mooncake.jsonl", "preset": "mooncake", "block_tokens": 512})
    assert plan.prefix_block_tokens == 512
    assert plan_of(tmp_path, {"path": "mooncake.jsonl", "preset": "mooncake"}).prefix_block_tokens is None
    rows[1]["hash_ids"] = "46 49"
    (tmp_path / "mooncake.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    line = refused(tmp_path, {"path": "mooncake.jsonl", "preset": "mooncake", "block_tokens": 512})
    assert line.endswith("mooncake.jsonl: row 2: hash_ids '46 49' is not a JSON list of ids"), line


def test_a_generated_trace_shares_blocks_only_within_its_prefix_groups(tmp_path):
    settings = SyntheticTrace(rows=400, seed=2, day_s=600, layout="mooncake", block_tokens=64)
    path = tmp_path / "day.jsonl"
    write_trace(settings, path)
    alone = plan_of(tmp_path, {"path": path.name, "preset": "mooncake", "block_tokens": 64})
    assert planned_reuse(((r.prompt_tokens, r.hash_ids) for r in alone.requests), 64).reused_tokens == 0
    write_trace(settings.model_copy(update={"prefix_groups": 4, "prefix_blocks": 2}), path)
    grouped = plan_of(tmp_path, {"path": path.name, "preset": "mooncake", "block_tokens": 64})
    assert [r.prompt_tokens for r in grouped.requests] == [r.prompt_tokens for r in alone.requests]
    blocks = [json.loads(str(r.hash_ids)) for r in grouped.requests]
    # Each row keeps its last block its own; its shared blocks are one group's, in order.
    assert all(len(b) == -(-r.prompt_tokens // 64) for b, r in zip(blocks, grouped.requests, strict=True))
    assert all(b[-1] >= 8 and [i for i in b if i < 8] in ([], [0], [2], [4], [6], [0, 1], [2, 3], [4, 5], [6, 7])
               for b in blocks)
    firsts = [b[0] for b in blocks if len(b) > 1]
    assert firsts.count(0) > firsts.count(6) > 0  # Zipf: the first group is the most popular
    reuse = planned_reuse(((r.prompt_tokens, r.hash_ids) for r in grouped.requests), 64)
    assert 0.2 < reuse.share < 0.8


def test_a_generated_trace_in_each_layout_reads_back_as_generated(tmp_path):
    settings = SyntheticTrace(rows=300, seed=5, day_s=600)
    expected = generate(settings)
    for layout, suffix in (("azure", "csv"), ("mooncake", "jsonl")):
        path = tmp_path / f"day.{suffix}"
        write_trace(settings.model_copy(update={"layout": layout}), path)
        plan = plan_of(tmp_path, {"path": path.name, "preset": layout})
        assert [r.prompt_tokens for r in plan.requests] == expected["prompt_tokens"].tolist()
        assert [r.output_tokens for r in plan.requests] == expected["output_tokens"].tolist()
        # The Azure layout keeps 100 ns, Mooncake's milliseconds.
        np.testing.assert_allclose([r.arrival_s for r in plan.requests], expected["arrival_s"], atol=6e-4)


def test_explicit_columns_in_parquet_keep_session_and_label(tmp_path):
    table = pa.table({"t_ms": [0, 250, 1000], "in": [10, 20, 30], "out": [1, 2, 3], "conv": ["a", "b", "a"],
                      "tenant": ["x", "y", "x"], "other": [0.1, 0.2, 0.3]})
    pq.write_table(table, tmp_path / "log.parquet")
    columns = {"arrival": "t_ms", "prompt_tokens": "in", "output_tokens": "out", "session": "conv", "label": "tenant"}
    plan = plan_of(tmp_path, {"path": "log.parquet", "columns": columns, "time_unit": "ms"})
    assert [(r.arrival_s, r.session, r.label, r.hash_ids) for r in plan.requests] == [
        (0.0, "a", "x", None), (0.25, "b", "y", None), (1.0, "a", "x", None)]


def test_a_window_a_limit_and_a_time_scale_cut_and_speed_the_replay(tmp_path):
    (tmp_path / "t.csv").write_text("at,p,o\n" + "".join(f"{10 * i},{i + 1},{i + 2}\n" for i in range(100)))
    columns = {"arrival": "at", "prompt_tokens": "p", "output_tokens": "o"}
    plan = plan_of(tmp_path, {"path": "t.csv", "columns": columns, "start_s": 200, "window_s": 300,
                              "time_scale": 10})
    assert [r.trace_row for r in plan.requests] == list(range(20, 50))
    assert plan.requests[0].arrival_s == 0.0 and plan.requests[-1].arrival_s == 29.0
    limited = plan_of(tmp_path, {"path": "t.csv", "columns": columns, "start_s": 200}, num_requests=5)
    assert [r.trace_row for r in limited.requests] == [20, 21, 22, 23, 24]


def test_a_rate_replays_the_trace_at_that_mean_rate_in_its_own_shape(tmp_path):
    # Gaps of 10 s, then 30 s: the shape is kept, the mean gap becomes 1/rate.
    times = [10 * i for i in range(50)] + [490 + 30 * i for i in range(1, 51)]
    (tmp_path / "t.csv").write_text("at,p,o\n" + "".join(f"{t},5,6\n" for t in times))
    columns = {"arrival": "at", "prompt_tokens": "p", "output_tokens": "o"}
    arrivals = np.array([r.arrival_s for r in plan_of(tmp_path, {"path": "t.csv", "columns": columns,
                                                                 "rate": 4}).requests])
    assert np.mean(np.diff(arrivals)) == pytest.approx(0.25)
    np.testing.assert_allclose(np.diff(arrivals), np.diff(times) / (times[-1] / 99 * 4), atol=2e-6)
    one = tmp_path / "one.csv"
    one.write_text("at,p,o\n7,5,6\n7,5,6\n")
    assert "all arrive at once: no rate to scale to" in refused(tmp_path, {"path": one.name, "columns": columns,
                                                                          "rate": 4})


def test_a_burst_of_a_trace_sends_its_first_rows_at_once_with_their_lengths(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE_ROWS)
    plan = plan_of(tmp_path, {"path": "azure.csv", "preset": "azure"}, arrival={"kind": "burst"}, num_requests=3)
    assert plan.arrival == "burst"
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.trace_row) for r in plan.requests] == [
        (0.0, 374, 44, 0), (0.0, 396, 109, 1), (0.0, 879, 20, 2)]


def test_rows_over_max_tokens_are_refused_with_their_count_or_clipped_and_counted(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE_ROWS)
    line = refused(tmp_path, {"path": "azure.csv", "preset": "azure", "max_tokens": 450})
    assert line.endswith("azure.csv: 2 of 4 rows ask for more than max_tokens 450 (first: row 2, 396 + 109); set"
                         " over_limit: clip to clip them")
    plan = plan_of(tmp_path, {"path": "azure.csv", "preset": "azure", "max_tokens": 450, "over_limit": "clip"})
    assert [(r.prompt_tokens, r.output_tokens) for r in plan.requests] == [(374, 44), (396, 54), (449, 1), (91, 7)]
    assert plan.trace_clipped == 2


def test_a_plan_that_is_no_trace_has_none_of_a_traces_fields():
    document = json.loads(build_plan(load_spec("cpu-anyscale-cap32")).to_json())
    assert "trace_clipped" not in document
    assert set(document["requests"][0]) == {"index", "prompt_tokens", "output_tokens", "arrival_s"}


def test_naive_waves_on_a_trace_wait_for_their_last_member(tmp_path):
    (tmp_path / "azure.csv").write_text(AZURE_ROWS)
    plan = plan_of(tmp_path, {"path": "azure.csv", "preset": "azure"})
    items = build_work(plan, ["p"] * 4, "naive", 2)
    assert [(item.wave, item.arrival_s, item.requested_output_tokens) for item in items] == [
        (0, 3.5, 109), (0, 3.5, 109), (1, 20.0, 20), (1, 20.0, 20)]
    assert [item.arrival_s for item in build_work(plan, ["p"] * 4, "static", 2)] == [0.0, 3.5, 3.5, 20.0]


def test_the_shipped_trace_workload_is_a_day_in_two_minutes():
    plan = build_plan(load_spec("cpu-trace-chat"))
    assert len(plan.requests) == 600 and plan.requests[-1].arrival_s == pytest.approx(120.0, abs=0.01)


@pytest.mark.parametrize(("content", "trace", "fragment"), [
    (AZURE_ROWS.replace("ContextTokens", "Context"), {"preset": "azure"},
     "no column 'ContextTokens' (its columns: TIMESTAMP, Context, GeneratedTokens)"),
    (AZURE_ROWS.replace(",44\n", ",-44\n"), {"preset": "azure"},
     "row 1: GeneratedTokens must be a whole number of tokens of at least 1, got -44"),
    (AZURE_ROWS.replace(",109\n", ",10.5\n"), {"preset": "azure"},
     "row 2: GeneratedTokens must be a whole number of tokens of at least 1, got 10.5"),
    (AZURE_ROWS.replace("18:16:06", "18:15:06"), {"preset": "azure"},
     "row 4: TIMESTAMP goes backwards (a trace is replayed in arrival order: sort it by arrival)"),
    ("", {"preset": "azure"}, "no rows (an empty trace)"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", {"preset": "azure"}, "no rows (an empty trace)"),
    ("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", {"preset": "azure"}, "a binary file, not CSV text"),
    ('{"timestamp": 0, "input_length": 5}\n', {"preset": "mooncake", "format": "jsonl"},
     "line 1: no 'output_length' (its keys: timestamp, input_length)"),
    ('{"timestamp": 0, "input_length": 5, "output_length": true, "hash_ids": []}\n',
     {"preset": "mooncake", "format": "jsonl"}, "row 1: output_length must be a whole number of tokens"),
    (AZURE_ROWS, {"preset": "azure", "start_s": 100}, "no row in the window (start_s 100, window_s None) of its 4"),
])
def test_bad_traces_are_one_line_naming_the_file_and_row(tmp_path, content, trace, fragment):
    (tmp_path / "bad.csv").write_bytes(content.encode("latin-1"))
    line = refused(tmp_path, {"path": "bad.csv", **trace})
    assert "\n" not in line and line.startswith(str(tmp_path / "bad.csv")) and fragment in line, line


@pytest.mark.parametrize(("trace", "extra", "fragment"), [
    ({"path": "t.csv", "preset": "alibaba"}, {}, "trace.preset: Input should be 'azure' or 'mooncake'"),
    ({"path": "t.csv"}, {}, "give a preset (azure, mooncake) or the columns"),
    ({"path": "t.csv", "preset": "azure"}, {"arrival": {"kind": "poisson", "rate": 2}},
     "arrival: a trace workload takes"),
    ({"path": "t.csv", "preset": "azure"}, {"output_tokens": {"kind": "fixed", "value": 8}},
     "output_tokens: a trace workload takes"),
    ({"path": "t.csv", "preset": "azure", "rate": 2, "time_scale": 3}, {}, "rate, time_scale: give one"),
    ({"path": "t.csv", "preset": "azure"}, {"duration_s": 30}, "duration_s: a trace is cut by its window_s"),
    ({"path": "t.csv", "preset": "azure", "time_scale": 0}, {}, "trace.time_scale: Input should be greater than 0"),
    ({"path": "t.csv", "preset": "azure", "block_tokens": 512}, {}, "block_tokens: needs a hash_ids column"),
    ({"path": "t.jsonl", "preset": "mooncake", "block_tokens": 512,
      "columns": {"arrival": "timestamp", "prompt_tokens": "input_length", "output_tokens": "output_length",
                  "hash_ids": "hash_ids", "session": "chat"}, "conversation": {}},
     {}, "block_tokens: a conversation's turns already share"),
    ({"path": "t.csv", "preset": "azure"}, {"shared_prefix": {"tokens": 64}},
     "shared_prefix: a trace brings its own prefixes"),
])
def test_bad_trace_settings_are_one_line_naming_the_field(tmp_path, trace, extra, fragment):
    with pytest.raises(UsageError) as raised:
        load_spec(workload(tmp_path, trace, **extra))
    assert fragment in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_a_window_larger_than_a_plan_may_hold_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.workload.trace.MAX_REQUESTS", 3)
    (tmp_path / "azure.csv").write_text(AZURE_ROWS)
    assert "the window holds more than 3 rows" in refused(tmp_path, {"path": "azure.csv", "preset": "azure"})
    assert len(plan_of(tmp_path, {"path": "azure.csv", "preset": "azure"}, num_requests=3).requests) == 3
