"""A trace to replay without a download: a day of bursty arrivals and heavy-tailed, correlated lengths.

Shaped as production chat traffic is described (the Azure and Mooncake traces' papers),
not copied from one: the rate rises and falls over the day (a sine, lowest at the start),
arrivals within it come in bursts (gamma gaps of shape below 1 on the day's clock), and
prompt and output lengths are log-normal, correlated through a Gaussian copula (a long
question tends to get a long answer), capped. Every figure is drawn from the seed, so a
trace is a pure function of its settings. It is written in a public trace's own column
layout, so it reads with that preset (harness.workload.trace.PRESETS).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.workload.limits import Count, PositiveFinite, Seed

# The trace's first row, for the Azure layout's absolute TIMESTAMP column.
TRACE_START = datetime(2026, 1, 5)
# Tokens per prefix hash block, as in the Mooncake trace.
HASH_BLOCK_TOKENS = 512
# Points of the day's clock: the rate's integral is inverted on this grid.
CLOCK_POINTS = 4096


class SyntheticTrace(BaseModel):
    """What the generated trace looks like; every default is sized for a 2-core CPU machine's replay."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows: Count = Field(600, description="requests in the trace")
    seed: Seed = Field(0, description="seed of every draw")
    day_s: PositiveFinite = Field(86_400.0, description="length of the trace's day, seconds")
    swing: float = Field(0.6, ge=0, lt=1, description="how far the rate swings over the day: the peak is 1 + swing"
                         " times the mean, the trough 1 - swing")
    burstiness: PositiveFinite = Field(0.5, description="gamma shape of the gaps on the day's clock: 1 is Poisson,"
                                       " below 1 burstier")
    prompt_median: Count = Field(192, description="median prompt length, tokens")
    prompt_sigma: PositiveFinite = Field(0.6, description="log-normal sigma of the prompt lengths")
    prompt_max: Count = Field(1024, description="longest prompt, tokens")
    output_median: Count = Field(64, description="median output length, tokens")
    output_sigma: PositiveFinite = Field(1.0, description="log-normal sigma of the output lengths (the spread that"
                                         " drives the batching gap)")
    output_max: Count = Field(1024, description="longest output, tokens")
    correlation: float = Field(0.4, ge=-1, le=1, description="correlation of log prompt and log output lengths")
    layout: Literal["azure", "mooncake"] = Field(
        "azure", description="column layout: azure (CSV: TIMESTAMP, ContextTokens, GeneratedTokens) or mooncake"
        " (JSONL: timestamp in ms, input_length, output_length, hash_ids)",
    )


def generate(settings: SyntheticTrace) -> dict[str, np.ndarray]:
    """The trace's columns: arrival_s (seconds from its start), prompt_tokens, output_tokens (int64)."""
    rng = np.random.default_rng(settings.seed)
    arrivals = _arrivals(settings, rng)
    normal = rng.standard_normal((settings.rows, 2))
    rho = settings.correlation
    z_prompt = normal[:, 0]
    z_output = rho * normal[:, 0] + math.sqrt(1 - rho * rho) * normal[:, 1]
    prompt = _lognormal(settings.prompt_median, settings.prompt_sigma, settings.prompt_max, z_prompt)
    output = _lognormal(settings.output_median, settings.output_sigma, settings.output_max, z_output)
    return {"arrival_s": arrivals, "prompt_tokens": prompt, "output_tokens": output}


def write_trace(settings: SyntheticTrace, path: Path) -> int:
    """Write the trace to `path` in its layout; the rows written."""
    columns = generate(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    if settings.layout == "azure":
        with path.open("w", encoding="utf-8") as out:
            out.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
            for at, prompt, output in zip(columns["arrival_s"], columns["prompt_tokens"], columns["output_tokens"],
                                          strict=True):
                stamp = TRACE_START + timedelta(seconds=float(at))
                out.write(f"{stamp:%Y-%m-%d %H:%M:%S.%f}0,{prompt},{output}\n")
    else:
        with path.open("w", encoding="utf-8") as out:
            for at, prompt, output in zip(columns["arrival_s"], columns["prompt_tokens"], columns["output_tokens"],
                                          strict=True):
                blocks = list(range(math.ceil(int(prompt) / HASH_BLOCK_TOKENS)))
                out.write(json.dumps({"timestamp": int(round(at * 1000)), "input_length": int(prompt),
                                      "output_length": int(output), "hash_ids": blocks}) + "\n")
    return settings.rows


def _arrivals(settings: SyntheticTrace, rng: np.random.Generator) -> np.ndarray:
    """Arrival times over the day: gamma gaps on the clock where the day's rate is constant, mapped back."""
    gaps = rng.gamma(settings.burstiness, 1.0 / settings.burstiness, settings.rows)
    operational = np.cumsum(gaps) - gaps[0]
    # The day's clock runs at rate(t) / mean rate; its total is the operational time the gaps fill.
    grid = np.linspace(0.0, settings.day_s, CLOCK_POINTS)
    relative_rate = 1.0 - settings.swing * np.cos(2 * math.pi * grid / settings.day_s)
    clock = np.concatenate([[0.0], np.cumsum((relative_rate[1:] + relative_rate[:-1]) / 2 * np.diff(grid))])
    # Scaled so that the last arrival falls at the day's end.
    operational *= clock[-1] / max(operational[-1], 1e-9)
    return np.asarray(np.interp(operational, clock, grid), dtype=np.float64)


def _lognormal(median: int, sigma: float, cap: int, z: np.ndarray) -> np.ndarray:
    values = np.rint(median * np.exp(sigma * z)).astype(np.int64)
    return np.asarray(np.clip(values, 1, cap), dtype=np.int64)
