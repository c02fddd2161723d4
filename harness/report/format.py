"""How the report writes numbers: one place for the units and precision of every cell.

Spread levels are named by `harness.analysis.levels.level_name`.
"""

from __future__ import annotations

import math
from typing import Any


def num(value: Any) -> str:
    """Compact number: thousands separated above 100, 3 significant figures below 10."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def with_low(value: Any, low: Any) -> str:
    """A figure and, in brackets, the low end of its interval: `0.85 [0.14]`."""
    return f"{num(value)} [{num(low)}]"


def ms(seconds: float) -> str:
    """Seconds written as milliseconds (compact, like `num`)."""
    return num(seconds * 1e3)


def pct(value: float, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal; `signed` always shows the sign."""
    if math.isnan(value):
        return "—"
    # Rounding first turns float noise like -1e-16 into +0.0%, not -0.0%.
    value = round(value, 3) + 0.0
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def times(value: float) -> str:
    """A ratio as `1.60x`."""
    return "—" if math.isnan(value) else f"{value:.2f}x"
