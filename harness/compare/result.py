"""A comparison of two builds, judged: each (workload, system)'s pairs, verdicts and step-log explanation.

Pure: the runs come in assessed (harness.jobs.compare loads them). Pair i of a
(workload, system) is A's and B's repetition i. The figure judged is the engine's own total
tok/s where every run of the pairs has an engine step log, else the client's total tok/s;
the client's verdict is kept beside the engine's, since the two can disagree where a build
changes the API server rather than the engine. A pair either side of which had failed
requests is a fault, not noise: its (workload, system) is inconclusive, with the count.
The whole comparison's outcome is the worst of its cells' (as `gate`'s): regression, else
inconclusive, else pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from harness.compare.explain import StepChange, explain
from harness.compare.statistics import Outcome, PairedVerdict, judge_pairs
from harness.gate.compare import EXIT_CODES, measured_value
from harness.history.rows import RepetitionRow

ENGINE_METRIC = "engine_total_tok_s"
CLIENT_METRIC = "total_tok_s"


@dataclass(frozen=True)
class PairedRun:
    """One finished run of a comparison: its side ("a" or "b"), repetition, history row and step log."""

    side: str
    repetition: int
    row: RepetitionRow
    steps: pd.DataFrame | None


@dataclass(frozen=True)
class CellComparison:
    """One (workload, system): B against A on the judged figure, the client's figure, and the step log's story."""

    workload: str
    system: str
    metric: str
    a_values: tuple[float, ...]
    b_values: tuple[float, ...]
    verdict: PairedVerdict | None
    client: PairedVerdict | None
    change: StepChange | None
    outcome: Outcome
    # Why the outcome, when it is not the verdict's own (failed requests, missing pairs), and warnings.
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ComparisonResult:
    """Every (workload, system) compared, the two builds' names, and the rule's parameters."""

    a: str
    b: str
    cells: tuple[CellComparison, ...]
    threshold: float
    pair_noise: float
    # The drop caught 4 times in 5 at the asked pairs and the expected noise, as stated before the runs.
    expected_detectable: float
    # What both builds ran: the model with its shape and the machine (harness.report.setup.model_and_machine_lines).
    setup: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        outcomes = {cell.outcome for cell in self.cells}
        if "regression" in outcomes:
            return "regression"
        return "inconclusive" if "inconclusive" in outcomes or not self.cells else "pass"

    @property
    def exit_code(self) -> int:
        """As `gate`: 0 pass, 1 regression, 3 inconclusive."""
        return EXIT_CODES[self.outcome]


def judge_comparison(a: str, b: str, runs: Sequence[PairedRun], threshold: float, pair_noise: float,
                     expected_detectable: float, setup: tuple[str, ...] = ()) -> ComparisonResult:
    """Pair `runs` by (workload, system, repetition) and judge each (workload, system); `a`, `b` name the builds,
    `setup` says what both ran."""
    groups: dict[tuple[str, str], dict[tuple[str, int], PairedRun]] = {}
    for run in runs:
        groups.setdefault((run.row.workload, run.row.system), {})[(run.side, run.repetition)] = run
    cells = tuple(_judge_cell(workload, system, members, threshold)
                  for (workload, system), members in groups.items())
    return ComparisonResult(a, b, cells, threshold, pair_noise, expected_detectable, setup)


def _judge_cell(workload: str, system: str, members: dict[tuple[str, int], PairedRun],
                threshold: float) -> CellComparison:
    repetitions = sorted({repetition for _, repetition in members})
    pairs = [(members[("a", rep)], members[("b", rep)]) for rep in repetitions
             if ("a", rep) in members and ("b", rep) in members]
    notes = []
    if len(pairs) < len(repetitions):
        notes.append(f"{len(repetitions) - len(pairs)} repetitions lack a run on one side: left out")
    flat = [run for pair in pairs for run in pair]
    metric = ENGINE_METRIC if flat and all(measured_value(run.row, ENGINE_METRIC) for run in flat) else CLIENT_METRIC
    if metric == CLIENT_METRIC:
        notes.append("judged on the client's total tok/s: some run has no engine step log")
    kept = [(a, b) for a, b in pairs if measured_value(a.row, metric) and measured_value(b.row, metric)]
    a_values = tuple(measured_value(a.row, metric) or math.nan for a, _ in kept)
    b_values = tuple(measured_value(b.row, metric) or math.nan for _, b in kept)
    failed = sum(run.row.errors for run in flat)
    unstable = [run for run in flat if not run.row.stable]
    if unstable:
        runs = f"{len(unstable)} run" + ("s" if len(unstable) != 1 else "")
        notes.append(f"{runs} flagged by the run's own health check ({unstable[0].row.health_reasons[0]}): kept,"
                     " since the judged figure is measured, not re-priced")
    if len(kept) < 2:
        return CellComparison(workload, system, metric, a_values, b_values, None, None, None, "inconclusive",
                              (f"{len(kept)} usable pairs: at least 2 are needed", *notes))
    verdict = judge_pairs(a_values, b_values, threshold)
    client = _client_verdict(kept, threshold) if metric == ENGINE_METRIC else None
    steps_a = [a.steps for a, _ in kept if a.steps is not None]
    steps_b = [b.steps for _, b in kept if b.steps is not None]
    change = explain(steps_a, steps_b) if len(steps_a) == len(steps_b) == len(kept) else None
    outcome = verdict.outcome
    if failed:
        outcome = "inconclusive"
        notes.insert(0, f"{failed} failed requests in this (workload, system)'s runs: a fault, not noise")
    return CellComparison(workload, system, metric, a_values, b_values, verdict, client, change, outcome, tuple(notes))


def _client_verdict(pairs: Sequence[tuple[PairedRun, PairedRun]], threshold: float) -> PairedVerdict | None:
    values = [(measured_value(a.row, CLIENT_METRIC), measured_value(b.row, CLIENT_METRIC)) for a, b in pairs]
    usable = [(a, b) for a, b in values if a and b]
    if len(usable) < 2:
        return None
    return judge_pairs([a for a, _ in usable], [b for _, b in usable], threshold)
