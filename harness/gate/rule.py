"""The gate's parameters and their defaults: what the CLI, a nightly suite and the rule share.

Nothing heavy is imported here, so `batchbench --help` and its options stay quick; the
rule itself (harness.gate.statistics) explains each parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.02
# A regression must be shown to exceed this drop, not merely to be a drop.
DEFAULT_MARGIN = 0.03
# The margin test confirms a drop the first test found: it may be less strict.
DEFAULT_MARGIN_ALPHA = 0.05
# Below this many repetitions a side the median is one or two values: no gate.
MIN_REPETITIONS = 3
# Repetition-to-repetition CV above this: the machine moved too much to resolve the threshold.
MAX_REPETITION_CV = 0.10


@dataclass(frozen=True)
class GateRule:
    """The gate's parameters; ValueError on values outside their range."""

    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    margin: float = DEFAULT_MARGIN
    margin_alpha: float = DEFAULT_MARGIN_ALPHA
    min_repetitions: int = MIN_REPETITIONS
    max_repetition_cv: float = MAX_REPETITION_CV

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold must lie in (0, 1), got {self.threshold}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        if not 0 <= self.margin < self.threshold:
            raise ValueError(f"margin must lie in [0, threshold {self.threshold}), got {self.margin}")
        if not 0 < self.margin_alpha < 1:
            raise ValueError(f"margin_alpha must lie in (0, 1), got {self.margin_alpha}")
        if self.min_repetitions < 2:
            raise ValueError(f"min_repetitions must be >= 2, got {self.min_repetitions}")
        if not self.max_repetition_cv > 0:
            raise ValueError(f"max_repetition_cv must be > 0, got {self.max_repetition_cv}")


# What the CLI and a nightly suite apply unless told otherwise.
DEFAULT_RULE = GateRule()

# The figure compared. `auto`: for open-loop (Poisson) repetitions the median end-to-end latency
# (at one machine speed when every repetition has an engine log), since their throughput is the
# offered rate whatever the server does; otherwise the engine's total tok/s when every
# repetition has it, else the client's.
MetricChoice = Literal["auto", "engine_total_tok_s", "total_tok_s", "output_tok_s", "e2e_p50_s",
                       "e2e_p50_at_one_speed_s"]
METRIC_CHOICES: tuple[MetricChoice, ...] = get_args(MetricChoice)
# Figures where lower is better: the gate judges their reciprocals, so that a drop is a regression throughout.
LOWER_IS_BETTER = frozenset({"e2e_p50_s", "e2e_p50_at_one_speed_s"})


def format_figure(metric: str, value: float) -> str:
    """A figure of `metric` as the gate's tables print it: seconds to 3 digits, tok/s to the unit."""
    return f"{value:.3g} s" if metric in LOWER_IS_BETTER else f"{value:,.0f}"


# A rolling baseline: the last this many accepted nights of a configuration.
BASELINE_NIGHTS = 7
