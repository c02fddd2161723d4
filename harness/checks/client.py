"""Was the load client, not the server, the bottleneck of any run? The health checks' client-bound verdict.

Each run is judged exactly as a report judges it (harness.analysis.cells.assess_run,
harness.analysis.health): client-bound when its client used more than 90% of a core, or
when its event loop lagged by more than 5% of the median inter-token time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.cells import assess_run
from harness.analysis.gap import GapEntry
from harness.analysis.health import CLIENT_BOUND_CHECKS, Check
from harness.analysis.metrics import metrics_for_run
from harness.rundir.reader import load_run


@dataclass(frozen=True)
class ClientBound:
    """Each run's client-bound reasons, and the worst figure of each client check across the runs."""

    runs: int
    bound: tuple[tuple[str, str], ...]
    # Check name -> the check of the run where it came closest to (or past) its limit.
    worst: dict[str, Check]

    def summary(self) -> str:
        if self.bound:
            run, reason = self.bound[0]
            return f"{len(self.bound)} of {self.runs} runs client-bound; {run}: {reason}"
        closest = "; ".join(f"{name} at most {_share(check.value)} (limit {_share(check.limit)})"
                            for name, check in self.worst.items())
        return f"no run of {self.runs} client-bound: {closest}"


def client_bound(run_dirs: Sequence[Path]) -> ClientBound:
    """Judge every run directory's client."""
    bound: list[tuple[str, str]] = []
    worst: dict[str, Check] = {}
    for directory in run_dirs:
        data = load_run(directory)
        metrics = metrics_for_run(data)
        health = assess_run(data, metrics, GapEntry.from_run(data, metrics, None)).health
        bound += [(directory.name, reason) for reason in health.client_bound]
        for check in health.checks:
            if check.name in CLIENT_BOUND_CHECKS and math.isfinite(check.value):
                held = worst.get(check.name)
                if held is None or check.value / check.limit > held.value / held.limit:
                    worst[check.name] = check
    return ClientBound(len(run_dirs), tuple(bound), worst)


def _share(value: float) -> str:
    return f"{value:.1%}"
