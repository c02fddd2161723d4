"""The value types of workload files and command options: strict, finite and bounded.

Strict: YAML `true` is not the number 1, nor "8" the number 8. Finite: `.inf` and
`.nan` are not lengths or rates. Bounded: a value past these limits is a typo, and
would otherwise pass validation only to exhaust memory or wait forever in planning.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

# Far above any model's context window; a plan of such lengths still fits in memory.
MAX_TOKENS = 10_000_000
# A run of more requests than this is not a benchmark this harness can plan or hold.
MAX_REQUESTS = 1_000_000
# A week: no planned send time may lie further out.
MAX_DURATION_S = 7 * 24 * 3600.0
# Above any engine's batch; also bounds the naive client's users (one per row of a wave).
MAX_BATCH = 100_000

Tokens = Annotated[int, Strict(), Field(gt=0, le=MAX_TOKENS)]
Count = Annotated[int, Strict(), Field(gt=0, le=MAX_REQUESTS)]
Seed = Annotated[int, Strict(), Field(ge=0, lt=2**63)]
PositiveFinite = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
TokenMean = Annotated[float, Strict(), Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False)]
Seconds = Annotated[float, Strict(), Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)]
NonNegativeSeconds = Annotated[float, Strict(), Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)]
Batch = Annotated[int, Strict(), Field(gt=0, le=MAX_BATCH)]
Share = Annotated[float, Strict(), Field(gt=0, lt=1, allow_inf_nan=False)]
