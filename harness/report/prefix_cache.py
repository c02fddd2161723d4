"""The prefix cache in the report: what the plan reused beside what the server found cached.

The figures are harness.analysis.prefix_cache's; this module words them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harness.analysis.levels import level_name
from harness.analysis.prefix_cache import PrefixCacheUse
from harness.report.document import Block, Heading, Paragraph, Table
from harness.report.format import pct

CACHE_STATE = {True: "on", False: "off", None: "not known"}


def prefix_cache_blocks(uses: Sequence[PrefixCacheUse]) -> list[Block]:
    """A heading, one paragraph and one table; nothing when no run shared prefixes or cached them."""
    if not uses:
        return []
    return [
        Heading("Prefix cache"),
        Paragraph(
            "The plan's reuse is the share of prompt tokens in blocks an earlier request of the run already"
            " carried: what an unlimited cache, each request computed before the next came, would find. Found"
            " cached is the share of prompt tokens the engine did not compute (its step log); vLLM's counters"
            " (prefix_cache_hits / prefix_cache_queries) count a lookup each time a waiting request is tried, so"
            " they can differ. A server finds less than the plan's reuse where requests sharing a block arrive"
            " together (none finds it computed yet) or its cache evicts; each run's requests share blocks"
            " only with each other (a cache_salt per run), so no run finds another's prompts cached."
        ),
        Table(
            ("system", "level", "prefix cache", "plan's reuse", "found cached (engine)", "vLLM's counters"),
            tuple((use.system, level_name(use.level), CACHE_STATE[use.cache_on], pct(use.planned),
                   pct(use.engine), pct(use.metrics)) for use in uses),
            table_id="prefix-cache",
        ),
    ]


def prefix_cache_summary(uses: Sequence[PrefixCacheUse]) -> list[dict[str, Any]]:
    """summary.json's `prefix_cache`: per system and level, the three shares (null where not measured)."""
    return [{"system": use.system, "workload": level_name(use.level), "cache_on": use.cache_on,
             "planned_reuse": _value(use.planned), "found_cached": _value(use.engine),
             "counters_hit_rate": _value(use.metrics), "runs": use.runs} for use in uses]


def _value(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)
