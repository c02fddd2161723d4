"""One night of a suite: launch, run interleaved repetitions, gate, add repetitions where unsure, record.

Each server mode the suite needs is started once and stays up, unless the suite names it
running (`endpoint`, `static_endpoint`); the suite's `repetitions` of every (workload, system)
are interleaved (harness.sweep), so drift hits every configuration alike. Tonight's
repetitions are judged against the last accepted nights of the same configuration, machine
and server build; on the first night of a new build, against the previous build's, as an
upgrade (harness.gate.baselines); a configuration left inconclusive gets one more repetition
at a time, up to the suite's `extra_repetitions`.
Then every repetition goes into the history: accepted into future baselines when its configuration
passed (or when the user accepts the night, e.g. after an intended change).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.assess import assess_run_dirs
from harness.driver.distributed.shard import ClusterSpec
from harness.gate.baselines import from_history
from harness.gate.compare import GateResult, gate, group_by_config
from harness.gate.rule import GateRule
from harness.history.from_run import repetition_from_run
from harness.history.rows import RepetitionRow
from harness.history.store import HistoryStore
from harness.nightly.suite import LoadedSuite
from harness.rundir.manifest import untested_vllm
from harness.sweep.runs import SweepCell, run_cells
from harness.sweep.servers import run_targets
from harness.systems import SERVER_MODE, modes_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NightResult:
    """What a night measured and decided."""

    result: GateResult
    repetitions: tuple[RepetitionRow, ...]
    run_dirs: tuple[Path, ...]
    extra_repetitions: int
    # "UNTESTED VLLM ..." of each server launched on a vLLM outside the tested releases.
    untested_vllm: tuple[str, ...] = ()


def run_night(
    loaded: LoadedSuite,
    out: Path,
    store: HistoryStore,
    accept: bool,
    cluster: ClusterSpec | None = None,
) -> NightResult:
    """Run the suite into `out`/runs, gate it against the history, and append its repetitions.

    `cluster`: every run's load goes through Locust's master and these workers (None: one process).
    """
    suite = loaded.suite
    rule = GateRule(threshold=suite.gate.threshold)
    invocation_id = out.resolve().name
    with contextlib.ExitStack() as stack:
        targets = run_targets(suite.server, out, stack, suite.endpoints(), modes=modes_for(suite.systems),
                              workloads=loaded.specs)
        cells = [SweepCell(system, spec, targets[SERVER_MODE[system]])
                 for spec in loaded.specs for system in suite.systems]
        run_dirs = run_cells(cells, out / "runs", suite.repetitions, cluster=cluster)
        repetitions = _repetitions(run_dirs, invocation_id)
        result = gate(repetitions, from_history(store, repetitions, suite.gate.baseline_nights), rule,
                      first_night_passes=True)
        extra = 0
        while extra < suite.gate.extra_repetitions and (unsure := _inconclusive(result, repetitions)):
            extra += 1
            logger.info(f"{len(unsure)} configurations inconclusive:"
                        f" extra repetition {extra} of {suite.gate.extra_repetitions}")
            again = [cell for cell in cells if (cell.system, cell.spec.name) in unsure]
            run_dirs += run_cells(again, out / "runs", 1, first_repetition=suite.repetitions + extra, cluster=cluster)
            repetitions = _repetitions(run_dirs, invocation_id)
            result = gate(repetitions, from_history(store, repetitions, suite.gate.baseline_nights), rule,
                          first_night_passes=True)
    passed = {config.config_key for config in result.configs if config.outcome == "pass"}
    recorded = [row.model_copy(update={"accepted": accept or row.config_key in passed}) for row in repetitions]
    store.append(recorded)
    untested = untested_vllm(target.server for target in targets.values())
    return NightResult(result, tuple(recorded), tuple(run_dirs), extra, tuple(untested))


def _repetitions(run_dirs: Sequence[Path], invocation_id: str) -> list[RepetitionRow]:
    # Assessed together, as the report would: one machine-speed fit over the night.
    assessment = assess_run_dirs(run_dirs, allow_partial=True)
    return [repetition_from_run(run, source="nightly", invocation_id=invocation_id, accepted=False)
            for run in assessment.assessed]


def _inconclusive(result: GateResult, repetitions: Sequence[RepetitionRow]) -> set[tuple[str, str]]:
    """(system, workload) of every configuration the gate could not decide."""
    by_key = group_by_config(repetitions)
    return {(by_key[c.config_key][0].system, by_key[c.config_key][0].workload)
            for c in result.configs if c.outcome == "inconclusive"}
