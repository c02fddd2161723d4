"""A trace to replay without a download: a day of bursty arrivals and heavy-tailed, correlated lengths.

Shaped as production chat traffic is described (the Azure and Mooncake traces' papers),
not copied from one: the rate rises and falls over the day (a sine, lowest at the start),
arrivals within it come in bursts (gamma gaps of shape below 1 on the day's clock), and
prompt and output lengths are log-normal, correlated through a Gaussian copula (a long
question tends to get a long answer), capped. Every figure is drawn from the seed, so a
trace is a pure function of its settings. It is written in a public trace's own column
layout, so it reads with that preset (harness.workload.trace.PRESETS).

In the Mooncake layout each row lists its prompt's blocks (`hash_ids`, `block_tokens` each).
Every block is the row's own, unless `prefix_groups` is given: then each row belongs to one
of that many shared prefixes (a system prompt, a document), drawn with Zipf popularity, and
opens with up to `prefix_blocks` of its group's blocks, keeping at least its last block its
own; a replay with `block_tokens` and the prefix cache on meets that reuse.

With `conversations`, the day's arrivals are the starts of chats instead: each chat has a
geometric number of turns, and each later turn arrives a log-normal think time after the
previous one (as if its answer took no time: a replay sends it think_s after the answer
really ended, harness.workload.conversation). Its prompt length is the turn's new text;
three more columns name the chat (`session`), the turn (`turn`, from 1) and the think time
(`think_s`, 0 for a first turn).
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
# Zipf exponent of the shared prefixes' popularity: group k is chosen in proportion to 1/k.
PREFIX_POPULARITY = 1.0
# The columns a conversation trace adds, as written (harness.workload.trace.TraceColumns reads them by these roles).
CONVERSATION_COLUMNS = ("session", "turn", "think_s")
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
    block_tokens: Count = Field(HASH_BLOCK_TOKENS, description="tokens per hash_ids block (mooncake layout; the"
                                " Mooncake trace's are 512)")
    prefix_groups: Count | None = Field(None, description="shared prefixes the rows open with, Zipf-popular"
                                        " (mooncake layout); unset: every block is its row's own")
    prefix_blocks: Count = Field(2, description="blocks of a shared prefix, with --prefix-groups (a row keeps at"
                                 " least its last block its own)")
    conversations: bool = Field(False, description="write chats of several turns (--rows counts their turns), with"
                                " session, turn and think_s columns")
    turns_mean: float = Field(3.0, ge=1, le=100, allow_inf_nan=False, description="mean turns per chat (geometric,"
                              " at least 1), with --conversations")
    think_median_s: PositiveFinite = Field(20.0, description="median think time before a later turn, trace seconds"
                                           " (log-normal), with --conversations")
    think_sigma: PositiveFinite = Field(0.8, description="log-normal sigma of the think times, with --conversations")
    follow_up_median: Count = Field(48, description="median new prompt text of a later turn, tokens (its prompt sent"
                                    " also carries the chat so far), with --conversations")


def generate(settings: SyntheticTrace) -> dict[str, np.ndarray]:
    """The trace's columns: arrival_s (seconds from its start), prompt_tokens, output_tokens (int64); with
    conversations also session (str), turn (int64) and think_s (float64), the rows in arrival order."""
    rng = np.random.default_rng(settings.seed)
    chats = _chat_turns(settings, rng) if settings.conversations else np.ones(settings.rows, dtype=np.int64)
    starts = _arrivals(settings.model_copy(update={"rows": len(chats)}), rng)
    normal = rng.standard_normal((settings.rows, 2))
    rho = settings.correlation
    z_prompt = normal[:, 0]
    z_output = rho * normal[:, 0] + math.sqrt(1 - rho * rho) * normal[:, 1]
    output = _lognormal(settings.output_median, settings.output_sigma, settings.output_max, z_output)
    if not settings.conversations:
        prompt = _lognormal(settings.prompt_median, settings.prompt_sigma, settings.prompt_max, z_prompt)
        return {"arrival_s": starts, "prompt_tokens": prompt, "output_tokens": output}
    return _conversation_columns(settings, rng, chats, starts, z_prompt, output)


def _chat_turns(settings: SyntheticTrace, rng: np.random.Generator) -> np.ndarray:
    """Turns per chat: geometric of mean turns_mean, as many chats as fill `rows` turns (the last one cut)."""
    turns = rng.geometric(1.0 / settings.turns_mean, settings.rows)
    chats = int(np.searchsorted(np.cumsum(turns), settings.rows)) + 1
    turns = turns[:chats]
    turns[-1] -= int(turns.sum()) - settings.rows
    return np.asarray(turns, dtype=np.int64)


def _conversation_columns(settings: SyntheticTrace, rng: np.random.Generator, chats: np.ndarray, starts: np.ndarray,
                          z_prompt: np.ndarray, output: np.ndarray) -> dict[str, np.ndarray]:
    """The turns of every chat, in arrival order: a later turn arrives its think time after the previous one."""
    chat = np.repeat(np.arange(len(chats)), chats)
    turn = np.arange(settings.rows) - np.repeat(np.cumsum(chats) - chats, chats) + 1
    think = np.where(turn > 1, np.exp(settings.think_sigma * rng.standard_normal(settings.rows))
                     * settings.think_median_s, 0.0)
    # Think times add up within a chat (its rows are consecutive here; a first turn thinks 0).
    thought = np.cumsum(think)
    arrival = starts[chat] + thought - np.repeat(thought[np.cumsum(chats) - chats], chats)
    median = np.where(turn > 1, settings.follow_up_median, settings.prompt_median)
    prompt = _lognormal(median, settings.prompt_sigma, settings.prompt_max, z_prompt)
    order = np.argsort(arrival, kind="stable")
    digits = len(str(len(chats)))
    return {"arrival_s": arrival[order], "prompt_tokens": prompt[order],
            "output_tokens": output[order], "session": np.array([f"chat{c:0{digits}d}" for c in chat[order]]),
            "turn": turn[order].astype(np.int64), "think_s": np.round(think[order], 3)}


def write_trace(settings: SyntheticTrace, path: Path) -> int:
    """Write the trace to `path` in its layout; the rows written."""
    columns = generate(settings)
    chat = [name for name in CONVERSATION_COLUMNS if name in columns]
    blocks = _hash_ids(settings, columns["prompt_tokens"]) if settings.layout == "mooncake" else []
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        if settings.layout == "azure":
            out.write(",".join(["TIMESTAMP", "ContextTokens", "GeneratedTokens", *chat]) + "\n")
        for i, at in enumerate(columns["arrival_s"]):
            prompt, output = int(columns["prompt_tokens"][i]), int(columns["output_tokens"][i])
            extra = [columns[name][i].item() for name in chat]
            if settings.layout == "azure":
                stamp = TRACE_START + timedelta(seconds=float(at))
                out.write(",".join([f"{stamp:%Y-%m-%d %H:%M:%S.%f}0", str(prompt), str(output), *map(str, extra)])
                          + "\n")
            else:
                record = {"timestamp": int(round(at * 1000)), "input_length": prompt, "output_length": output,
                          "hash_ids": blocks[i], **dict(zip(chat, extra, strict=True))}
                out.write(json.dumps(record) + "\n")
    return settings.rows


def _hash_ids(settings: SyntheticTrace, prompt_tokens: np.ndarray) -> list[list[int]]:
    """Each row's block ids: its group's shared blocks first (with prefix_groups), then blocks of its own.

    Ids 0 .. groups x prefix_blocks - 1 are the shared blocks (group g's are g x prefix_blocks
    onwards); every other id is used once.
    """
    counts = np.ceil(prompt_tokens / settings.block_tokens).astype(np.int64)
    groups = settings.prefix_groups
    shared_ids = (groups or 0) * settings.prefix_blocks
    if groups is None:
        group = np.zeros(len(counts), dtype=np.int64)
        shared = np.zeros(len(counts), dtype=np.int64)
    else:
        # Its own stream: the lengths and arrivals stay those of the same trace without groups.
        rng = np.random.default_rng(np.random.SeedSequence(settings.seed, spawn_key=(1,)))
        weights = 1.0 / np.arange(1, groups + 1) ** PREFIX_POPULARITY
        group = rng.choice(groups, size=len(counts), p=weights / weights.sum())
        shared = np.minimum(settings.prefix_blocks, counts - 1)
    own = np.cumsum(counts - shared) - (counts - shared) + shared_ids
    return [[int(g) * settings.prefix_blocks + k for k in range(int(s))] + list(range(int(o), int(o + n - s)))
            for g, s, o, n in zip(group, shared, own, counts, strict=True)]


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


def _lognormal(median: int | np.ndarray, sigma: float, cap: int, z: np.ndarray) -> np.ndarray:
    values = np.rint(median * np.exp(sigma * z)).astype(np.int64)
    return np.asarray(np.clip(values, 1, cap), dtype=np.int64)
