"""What the prefix cache saved, per cell: the plan's reuse, the engine's uncomputed share, vLLM's counters."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.analysis.prefix_cache import prefix_cache_uses


def run(prefill: list[int], prompts: list[int], hits: tuple[float, float], queries: tuple[float, float],
        vllm_args: list[str], plan: dict | None = None, steps: bool = True):
    """A run's data as the analysis reads it: records, steps, telemetry, plan and the server's arguments."""
    records = pd.DataFrame({"ok": [True] * len(prompts), "prompt_tokens": prompts})
    return SimpleNamespace(
        records=records,
        steps=pd.DataFrame({"prefill_tokens": prefill}) if steps else None,
        telemetry=pd.DataFrame({"t": [2.0, 1.0], "prefix_cache_hits_total": [hits[1], hits[0]],
                                "prefix_cache_queries_total": [queries[1], queries[0]]}),
        plan=plan,
        manifest=SimpleNamespace(server=SimpleNamespace(mode="continuous", vllm_args=vllm_args)),
    )


def cell(*runs, system="continuous", level="w"):
    return SimpleNamespace(system=system, level=level, runs=tuple(SimpleNamespace(data=data) for data in runs))


PLAN = {"prefix_block_tokens": 10, "requests": [{"prompt_tokens": 30, "hash_ids": "[1, 2, 3]"},
                                                {"prompt_tokens": 30, "hash_ids": "[1, 2, 4]"}]}


def test_the_three_shares_of_a_cell_are_its_runs_medians():
    on = ["--enable-prefix-caching"]
    runs = [run([40], [30, 30], (0, 20), (0, 60), on, PLAN), run([42], [30, 30], (5, 23), (60, 120), on, PLAN),
            run([45], [30, 30], (0, 15), (0, 60), on, PLAN)]
    (use,) = prefix_cache_uses([cell(*runs)])
    assert use.cache_on is True and use.runs == 3
    assert use.planned == pytest.approx(20 / 60)  # the second request reuses blocks 1 and 2
    assert use.engine == pytest.approx(1 - 42 / 60)  # the median run computed 42 of 60 prompt tokens
    assert use.metrics == pytest.approx(18 / 60)


def test_cells_without_prefixes_or_a_cache_are_left_out_and_unknowns_are_nan():
    plain = run([60], [30, 30], (0, 0), (0, 60), ["--no-enable-prefix-caching"])
    assert prefix_cache_uses([cell(plain)]) == []
    # The user's own switch comes after the launcher's off switch: the last one wins.
    cached = run([60], [30, 30], (0, 0), (0, 0), ["--no-enable-prefix-caching", "--enable-prefix-caching"],
                 steps=False)
    (use,) = prefix_cache_uses([cell(cached)])
    assert use.cache_on is True and math.isnan(use.planned) and math.isnan(use.engine) and math.isnan(use.metrics)


def test_a_conversation_reuses_its_earlier_turns_prompts():
    plan = {"requests": [{"prompt_tokens": 40}, {"prompt_tokens": 100, "after": 0}]}
    (use,) = prefix_cache_uses([cell(run([100], [40, 100], (0, 40), (0, 140), ["--enable-prefix-caching"], plan))])
    assert use.planned == pytest.approx(40 / 140) and use.engine == pytest.approx(40 / 140)
