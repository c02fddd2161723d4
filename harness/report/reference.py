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
from harness.analysis.step_cost_swap import PlannedCell, RatioDifference, SystemCost, ratio_difference, system_cost
from harness.analysis.step_predict import ServerStepCost
from harness.budget import MAX_RATIO_SHIFT
from harness.reference import REFERENCE_REPORT, same_setup
from harness.report.document import Block, Paragraph, Table
from harness.systems import system_pair
from harness.workload.plan import build_plan


def reference_comparison(rows: Sequence[HeadlineRow], runs: Sequence[AssessedRun], reference: Mapping[str, Any],
                         smoke: bool = False, step_costs: Sequence[ServerStepCost] = (),
                         ) -> tuple[list[Block], dict[str, Any]]:
    """The blocks that set `rows` beside `reference`'s headline, and summary.json's `reference` entry.

    No blocks when there is no headline or it is a smoke run's; one paragraph when the
    runs' setup is not the reference's. `step_costs` (these runs' servers') and the
    reference's price both sets of plans, which says whether the plans or the machines'
    step costs make the difference.
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
    differences = _differences(shared, names, runs, by_level, reference, step_costs)
    header = ("spread", *(f"{name} {column}" for name in names for column in ("here", "reference")),
              "what differs (here / reference)")
    body = tuple(
        (level_name(row.level),
         *(cell for name in names for cell in (_ratio(_median(row.ratios, name)),
                                               _ratio(by_level[row.level]["ratios"].get(name)))),
         "; ".join(_explained(d) for d in differences if d.level == row.level) or "not modelled")
        for row in shared
    )
    plans = _plans(runs, reference)
    blocks: list[Block] = [
        Paragraph(f"Beside the committed reference ({named}). {plans} {_summary(differences)}"),
        Table(header, body, table_id="reference", numeric=False),
    ]
    causes = [{"level": d.level, "ratio": d.name, "here": d.here, "reference": d.reference,
               "step_costs": d.step_costs, "plans": d.plans, "left": d.left, "main_cause": d.main_cause}
              for d in differences]
    return blocks, entry | {"compared": True, "levels": [row.level for row in shared], "plans": plans,
                            "causes": causes}


def _differences(rows: Sequence[HeadlineRow], names: Sequence[str], runs: Sequence[AssessedRun],
                 by_level: Mapping[Any, Any], reference: Mapping[str, Any],
                 step_costs: Sequence[ServerStepCost]) -> list[RatioDifference]:
    """Each shared ratio's difference from the reference's, split into step costs and plans."""
    mode_of = {run.entry.system: run.data.manifest.server.mode for run in runs if run.data.manifest.server}
    ours = {cost.server.split()[0]: SystemCost(cost.fit.cost, cost.wave_gap_s) for cost in step_costs}
    theirs = {model["server"].split()[0]: system_cost(model) for model in reference.get("step_models") or []}
    costs_here = {system: ours[mode] for system, mode in mode_of.items() if mode in ours}
    costs_reference = {system: theirs[mode] for system, mode in mode_of.items() if mode in theirs}
    differences = []
    for row in rows:
        cells = [run for run in runs if run.entry.level == row.level and run.data.plan is not None]
        plans_here = {run.entry.system: PlannedCell(run.data.plan["requests"], run.data.manifest.batch_size)
                      for run in cells if run.data.plan is not None}
        plans_reference = {run.entry.system: _reference_plan(run, reference) for run in cells}
        for name in names:
            theirs_ratio = by_level[row.level]["ratios"].get(name)
            pair = system_pair(name)
            if name in row.ratios and theirs_ratio and pair is not None:
                difference = ratio_difference(row.level, pair, row.ratios[name].point, theirs_ratio, plans_here,
                                              plans_reference, costs_here, costs_reference)
                if difference is not None:
                    differences.append(difference)
    return differences


def _reference_plan(run: AssessedRun, reference: Mapping[str, Any]) -> PlannedCell:
    """The plan the reference ran for `run`'s workload: the same spec at the reference's request count."""
    spec = run.data.manifest.workload
    count = (reference.get("requests") or {}).get(spec.name)
    if count and spec.num_requests:
        spec = spec.model_copy(update={"num_requests": int(count)})
    plan = build_plan(spec)
    return PlannedCell([request.model_dump() for request in plan.requests], run.data.manifest.batch_size)


def _explained(difference: RatioDifference) -> str:
    return (f"{difference.name} {_change(difference.measured)}: step costs {_change(difference.step_costs)},"
            f" plans {_change(difference.plans)}, left {_change(difference.left)}")


def _summary(differences: Sequence[RatioDifference]) -> str:
    """One sentence on the main cause across the compared ratios."""
    if not differences:
        return "What differs is not modelled here (no step costs or plans to price)."
    causes = [d.main_cause for d in differences]
    cause = max(set(causes), key=causes.count)
    said = {
        "step costs": "the two machines' step costs (each host's fitted step-cost model), not the plans",
        "plans": "the plans' sizes, not the machines' step costs",
        "neither": "neither the plans nor the machines' step costs: the runs' own noise, or what no step-cost"
                   " model prices",
    }[cause]
    return (f"In {causes.count(cause)} of {len(causes)} ratios most of the difference is {said}: each ratio"
            " priced on these plans with this host's step costs, then with the reference's, then on the"
            " reference's plans (harness.analysis.step_cost_swap).")


def _change(factor: float) -> str:
    return f"{factor - 1:+.0%}"


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
    return (f"The plans differ ({'; '.join(differ)}); sizing keeps a plan's ratios within {MAX_RATIO_SHIFT:.0%}"
            " of the full plan's.")


def _median(estimates: Mapping[str, Estimate], name: str) -> float | None:
    return estimates[name].point if name in estimates else None


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"
