"""Why the measured gap is the size it is, written from the run's own split (harness.analysis.gap_causes).

Every cause named here is picked by the figures: the schedule alone (idle and padded
slots), then the step cost's growth with batch size, then prefill, each with the
factor by which it moves the ratio. A cost that takes less than a tenth off the
ratio (factor `NARROWS` or more) is not named as what keeps it small.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.gap_causes import GapCauses
from harness.report.document import Table
from harness.report.facts import LevelCauses

# A cost whose factor stays above this (it takes less than a tenth off the ratio) is not
# named as what keeps the ratio small.
NARROWS = 0.9
GROWTH = "the step cost's growth with batch size"
PREFILL = "prefill"
SCHEDULE = "the schedule itself"


def narrowing_causes(causes: GapCauses) -> list[str]:
    """The costs that take a tenth or more off the ratio, strongest first; empty if none does."""
    factors = {GROWTH: causes.growth_factor, PREFILL: causes.prefill_factor}
    return [name for name, factor in sorted(factors.items(), key=lambda item: item[1]) if factor < NARROWS]


def keeps_small(causes: GapCauses) -> str:
    """What keeps the ratio small: the strongest narrowing cost, else the schedule's own ratio."""
    named = narrowing_causes(causes)
    return named[0] if named else SCHEDULE


def cause_table(levels: Sequence[LevelCauses]) -> Table:
    """One row per cap and system against continuous: the ratio built up cost by cost."""
    header = ("cap", "continuous over", "measured (ratio of median runs)", "schedule alone",
              "+ step cost growth", "+ prefill (modelled)", "prefill share of continuous busy time",
              "keeps it small")
    rows = tuple(
        (str(level.level), causes.other, _x(causes.measured_ratio), _x(causes.schedule_ratio),
         f"{_x(causes.with_growth_ratio)} (×{causes.growth_factor:.2f})",
         f"{_x(causes.modelled_ratio)} (×{causes.prefill_factor:.2f})",
         f"{causes.continuous.prefill_share:.0%}", keeps_small(causes))
        for level in levels for causes in level.causes
    )
    return Table(header, rows, table_id="gap-causes", numeric=False)


def cause_sentences(level: LevelCauses) -> str:
    """At one cap, each pair's split in words, ending with what keeps its ratio small."""
    sentences = []
    for causes in level.causes:
        mine, theirs = causes.continuous, causes.against
        sentences.append(
            f"At cap {level.level} (B = {level.batch_size}), continuous/{causes.other} is"
            f" {_x(causes.measured_ratio)} (ratio of the median runs). The schedule alone, every step priced as"
            f" a step of one sequence and prefill free, gives {_x(causes.schedule_ratio)}: {causes.other} took"
            f" {theirs.busy_steps:,} busy engine steps and {theirs.idle_s:.1f} s idle where continuous took"
            f" {mine.busy_steps:,} steps and {mine.idle_s:.1f} s (the idle and padded slots of {causes.other}'s"
            " batches). Paying for each step's"
            f" other sequences makes it {_x(causes.with_growth_ratio)} (×{causes.growth_factor:.2f}"
            f"{_widening(causes)}); prefill,"
            f" {mine.prefill_share:.0%} of continuous's busy engine time and the same prompts in both, makes it"
            f" {_x(causes.modelled_ratio)} (×{causes.prefill_factor:.2f}). {_verdict(causes)}"
        )
    return " ".join(sentences)


def _verdict(causes: GapCauses) -> str:
    named = narrowing_causes(causes)
    if not named:
        return (f"Neither cost takes a tenth off: continuous/{causes.other} is as small as the schedule itself"
                f" makes it, {_x(causes.schedule_ratio)} at this batch size.")
    factors = {GROWTH: causes.growth_factor, PREFILL: causes.prefill_factor}
    listed = " and ".join(f"{name} (×{factors[name]:.2f})" for name in named)
    return f"What keeps continuous/{causes.other} small here: {listed}."


def _widening(causes: GapCauses) -> str:
    if causes.growth_factor <= 1:
        return ""
    return ", widening it: padded rows are paid for" if causes.other == "naive" else ", widening it"


def _x(ratio: float) -> str:
    return f"{ratio:.2f}×"
