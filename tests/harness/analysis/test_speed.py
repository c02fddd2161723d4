"""Runs priced at one machine speed: the same schedule on a slower machine gives the same figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.speed import MIN_STEPS, RunTiming, normalise
from harness.rundir.records import STEP_FIELDS

# Step cost of the "machine": 2 ms + 0.5 ms per running sequence + 1 us per context token.
OVERHEAD, PER_SEQUENCE, PER_CONTEXT = 0.002, 0.0005, 1e-6


def steps(slowdown: float, count: int = 200, idle_after: int | None = None, idle_s: float = 0.0) -> pd.DataFrame:
    """`count` back-to-back steps of 1..16 sequences, each costing the machine's price x slowdown."""
    rows, t = [], 0.0
    rng = np.random.default_rng(7)
    for i in range(count):
        running = int(rng.integers(1, 17))
        context = int(rng.integers(100, 2000)) * running
        cost = (OVERHEAD + PER_SEQUENCE * running + PER_CONTEXT * context) * slowdown
        rows.append({"t_s": t, "end_s": t + cost, "running": running, "waiting": 1, "prefill_tokens": 0,
                     "decode_tokens": running, "context_tokens": context, "generated_tokens": running,
                     "admitted": [], "finished": []})
        t += cost + (idle_s if i == idle_after else 0.0)
    frame = pd.DataFrame(rows, columns=list(STEP_FIELDS))
    frame.loc[len(frame) - 1, "waiting"] = 0  # the last step leaves the engine with nothing to do
    return frame


def timing(table: pd.DataFrame, tokens: float = 10_000.0) -> RunTiming:
    return RunTiming(table, float(table["end_s"].max() - table["t_s"].min()), tokens)


def test_the_same_schedule_on_a_slower_machine_normalises_to_the_same_figure():
    fast, slow = steps(1.0), steps(1.25)
    fit, figures = normalise({"fast": timing(fast), "slow": timing(slow)})
    assert fit is not None and fit.r_squared > 0.9
    assert figures["slow"].speed / figures["fast"].speed == pytest.approx(1.25, rel=1e-6)
    # Equal but for the last step, which has no measured cycle and stays as measured.
    assert figures["slow"].total_tok_s == pytest.approx(figures["fast"].total_tok_s, rel=5e-3)
    # Measured, the slow run's throughput is 20% lower; normalised, it is not.
    assert timing(slow).makespan_s / timing(fast).makespan_s == pytest.approx(1.25, rel=1e-3)


def test_idle_gaps_are_kept_as_measured():
    plain, waited = steps(1.0), steps(1.0, idle_after=50, idle_s=2.0)
    # A wave's turnaround: the step finished its one request and nothing waited.
    waited.loc[50, "waiting"] = 0
    waited.loc[50, "running"] = 1
    waited.at[50, "finished"] = [0]
    _, figures = normalise({"plain": timing(plain), "waited": timing(waited)})
    # The waited run is 2 s longer at any speed: its normalised figure stays lower.
    assert figures["waited"].total_tok_s < figures["plain"].total_tok_s


def test_too_few_steps_or_none_give_no_figures():
    assert normalise({"tiny": timing(steps(1.0, count=MIN_STEPS // 2))}) == (None, {})
    empty = pd.DataFrame(columns=list(STEP_FIELDS))
    assert normalise({"none": RunTiming(empty, 1.0, 1.0)}) == (None, {})


def test_a_run_without_busy_steps_is_left_out():
    lone = steps(1.0, count=1)
    _, figures = normalise({"many": timing(steps(1.0)), "lone": timing(lone)})
    assert set(figures) == {"many"} and math.isfinite(figures["many"].total_tok_s)
