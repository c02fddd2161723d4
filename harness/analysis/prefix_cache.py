"""What the prefix cache saved: the plan's own reuse beside the share of prompt tokens the server found cached.

Pure: cells in, figures out. Per run:
- planned: the plan's reuse (harness.workload.prefixes), the share of its prompt tokens in
  blocks an earlier request carried, or a conversation's earlier turns' prompts; NaN for a
  plan with neither.
- engine: 1 - (prompt tokens the engine computed) / (prompt tokens of the run's requests),
  from the step log (`prefill` counts computed prompt tokens only); NaN without one. A
  request preempted and recomputed counts its prompt again, so preemptions lower it.
- metrics: vLLM's own counters over the run, vllm:prefix_cache_hits / vllm:prefix_cache_queries,
  first to last telemetry poll; NaN where they were not polled. vLLM counts a lookup each
  time it tries to admit a waiting request, so a request tried more than once is counted
  more than once: the engine's figure is the one that answers "how much was not computed".
A cell's figure is the median over its runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.analysis.cells import Cell
from harness.analysis.levels import Level
from harness.rundir.reader import RunData
from harness.workload.prefixes import PREFIX_CACHE_OFF, PREFIX_CACHE_ON, conversation_reuse, planned_reuse


@dataclass(frozen=True)
class PrefixCacheUse:
    """One system at one level: how much of its prompts the plan reused and the server found cached."""

    system: str
    level: Level
    cache_on: bool | None  # None: a server batchbench did not launch
    planned: float
    engine: float
    metrics: float
    runs: int


def prefix_cache_uses(cells: Sequence[Cell]) -> list[PrefixCacheUse]:
    """Each cell whose runs shared prefixes or ran with the prefix cache on; [] when none did."""
    uses = []
    for cell in cells:
        datas = [run.data for run in cell.runs]
        cache_on = _cache_on(datas[0])
        planned = [_planned(data) for data in datas]
        if not cache_on and all(math.isnan(share) for share in planned):
            continue
        uses.append(PrefixCacheUse(
            system=cell.system, level=cell.level, cache_on=cache_on, planned=_median(planned),
            engine=_median([_engine(data) for data in datas]), metrics=_median([_metrics(data) for data in datas]),
            runs=len(datas)))
    return uses


def _cache_on(data: RunData) -> bool | None:
    server = data.manifest.server
    if server is None or server.mode is None:
        return None
    switches = [arg for arg in server.vllm_args if arg in (PREFIX_CACHE_ON, PREFIX_CACHE_OFF)]
    return bool(switches) and switches[-1] == PREFIX_CACHE_ON


def _planned(data: RunData) -> float:
    plan: dict[str, Any] | None = data.plan
    if not plan:
        return math.nan
    requests = plan["requests"]
    block_tokens = plan.get("prefix_block_tokens")
    if block_tokens:
        return planned_reuse(((r["prompt_tokens"], r.get("hash_ids")) for r in requests), int(block_tokens)).share
    if any(r.get("after") is not None for r in requests):
        return conversation_reuse((r["prompt_tokens"], r.get("after")) for r in requests).share
    return math.nan


def _engine(data: RunData) -> float:
    if data.steps is None or data.steps.empty:
        return math.nan
    admitted = data.records.loc[data.records["ok"], "prompt_tokens"].sum()
    return 1.0 - float(data.steps["prefill_tokens"].sum()) / float(admitted) if admitted else math.nan


def _metrics(data: RunData) -> float:
    telemetry = data.telemetry
    if telemetry.empty:
        return math.nan
    ordered = telemetry.sort_values("t")
    queries = ordered["prefix_cache_queries_total"].iloc[-1] - ordered["prefix_cache_queries_total"].iloc[0]
    hits = ordered["prefix_cache_hits_total"].iloc[-1] - ordered["prefix_cache_hits_total"].iloc[0]
    return float(hits / queries) if queries > 0 else math.nan


def _median(values: Sequence[float]) -> float:
    finite = [value for value in values if not math.isnan(value)]
    return float(np.median(finite)) if finite else math.nan
