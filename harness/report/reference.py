"""The committed reference beside a report's headline: which reference, and its ratios next to these.

The reference (harness.reference) is what `./reproduce` made with its defaults on the CPU
default setup. A report whose runs were made on that setup (its model, B and vLLM version,
on servers launched here) sets its headline ratios beside the reference's and says which
reference that is and whether its plans were the same size; any other report says in one
line that no reference applies, and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.analysis.cells import AssessedRun, HeadlineRow
from harness.analysis.levels import level_name
from harness.analysis.stats import Estimate
from harness.budget import MAX_RATIO_SHIFT
from harness.reference import REFERENCE_REPORT, same_setup
from harness.report.document import Block, Paragraph, Table


def reference_comparison(rows: Sequence[HeadlineRow], runs: Sequence[AssessedRun], reference: Mapping[str, Any],
                         smoke: bool = False) -> tuple[list[Block], dict[str, Any]]:
    """The blocks that set `rows` beside `reference`'s headline, and summary.json's `reference` entry.

    No blocks when there is no headline or it is a smoke run's; one paragraph when the
    runs' setup is not the reference's.
    """
    named = _named(reference)
    entry: dict[str, Any] = {"source": REFERENCE_REPORT, "made": reference.get("made"),
                             "git_shas": reference.get("git_shas"), "requests": reference.get("requests")}
    if not rows or smoke:
        return [], entry | {"compared": False, "why": "a smoke run (--quick)" if smoke else "no headline"}
    def not_compared(why: str, line: str) -> tuple[list[Block], dict[str, Any]]:
        return [Paragraph(line)], entry | {"compared": False, "why": why}

    differs = _setup_differs(runs, reference)
    if differs:
        return not_compared(differs, f"Not compared with the committed reference ({named}): {differs}.")
    by_level = {row["level"]: row for row in reference.get("headline", [])}
    shared = [row for row in rows if row.level in by_level]
    if not shared:
        why = "it measured none of these spread levels"
        return not_compared(why, f"Not compared with the committed reference ({named}): {why}.")
    if _is_reference(shared, runs, by_level, reference):
        return not_compared("these runs are the reference's", f"These runs are the committed reference's ({named}).")
    names = list(dict.fromkeys(name for row in shared for name in row.ratios))
    header = ("spread", *(f"{name} {column}" for name in names
                          for column in ("here", "reference", "at one speed here", "at one speed, reference")))
    body = tuple(
        (level_name(row.level), *(cell for name in names for cell in (
            _ratio(_median(row.ratios, name)),
            _ratio(by_level[row.level]["ratios"].get(name)),
            _ratio(_median(row.normalised_ratios, name)),
            _ratio(by_level[row.level]["ratios_at_one_speed"].get(name)),
        )))
        for row in shared
    )
    plans = _plans(runs, reference)
    blocks: list[Block] = [
        Paragraph(f"Beside the committed reference ({named}): the medians of its ratios and of these. {plans}"),
        Table(header, body, table_id="reference"),
    ]
    return blocks, entry | {"compared": True, "levels": [row.level for row in shared], "plans": plans}


def _is_reference(rows: Sequence[HeadlineRow], runs: Sequence[AssessedRun], by_level: Mapping[Any, Any],
                  reference: Mapping[str, Any]) -> bool:
    """Whether these are the reference's own runs: its commit, and every ratio's median to the last digit."""
    if sorted({run.data.manifest.git_sha for run in runs}, key=str) != sorted(reference.get("git_shas") or []):
        return False
    return all(by_level[row.level]["ratios"].get(name) == estimate.point
               for row in rows for name, estimate in row.ratios.items())


def _named(reference: Mapping[str, Any]) -> str:
    """The reference in a few words: where it is, what made it, when and at which commit."""
    shas = reference.get("git_shas") or []
    at = f" at git {', '.join(sha[:10] for sha in shas)}" if shas else ""
    made = f" on {reference['made']}" if reference.get("made") else ""
    return f"{REFERENCE_REPORT}, made by `{reference.get('command', './reproduce')}`{made}{at}"


def _setup_differs(runs: Sequence[AssessedRun], reference: Mapping[str, Any]) -> str:
    """Why these runs' setup is not the reference's, in words; empty when it is."""
    off = sorted({run.data.manifest.run_id for run in runs
                  if not same_setup(reference, _server(run), run.data.manifest.batch_size)})
    if not off:
        return ""
    models, sizes = reference.get("models") or [], reference.get("batch_sizes") or []
    setup = (f"{', '.join(models)} at B={', '.join(map(str, sizes))}"
             f" on vLLM {', '.join(reference.get('vllm_versions') or [])}, launched here")
    more = f" and {len(off) - 3} more" if len(off) > 3 else ""
    return f"it ran {setup}; {', '.join(off[:3])}{more} did not"


def _server(run: AssessedRun) -> dict[str, Any] | None:
    server = run.data.manifest.server
    return None if server is None else server.model_dump()


def _plans(runs: Sequence[AssessedRun], reference: Mapping[str, Any]) -> str:
    """Whether these runs asked for as many requests per workload as the reference's, in one sentence."""
    theirs = reference.get("requests") or {}
    ours = {run.entry.workload: run.data.manifest.counts.planned for run in runs}
    differ = [f"{workload} {count} (reference {theirs[workload]})" for workload, count in sorted(ours.items())
              if workload in theirs and theirs[workload] != count]
    if not differ:
        return "Both ran the same requests per workload."
    return (f"The plans differ ({'; '.join(differ)}): a plan's size moves its ratios (sizing keeps them within"
            f" {MAX_RATIO_SHIFT:.0%} of the full plan's), so a difference of that size is the plans', not the"
            " machine's.")


def _median(estimates: Mapping[str, Estimate], name: str) -> float | None:
    return estimates[name].point if name in estimates else None


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"
