"""A small reproduction: continuous > static > naive at each spread, and the measured tok/s against paper.

Throughput is Anyscale's (prompt + useful tokens) per second of makespan
(harness.analysis.metrics `total_tok_s`), the figure the on-paper prediction
(harness.paper.gpu_predict) gives for continuous and static at B. The naive
system has no prediction, only a floor, so it is compared with nothing but the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis.metrics import metrics_for_run
from harness.paper.gpu_predict import predict_workload
from harness.paper.gpu_setups import GpuSetup
from harness.rundir.reader import load_run
from harness.systems import SYSTEMS, SystemName
from harness.workload import WorkloadSpec

# Measured / predicted may be off by this much either way. The model is the card's spec
# sheet and one efficiency factor, not fitted (7-20% off Anyscale's published figures:
# docs/validation/predictions-on-paper.md); past this, something other than the model's
# known error is at play (a slower card or clock, eager mode, a starved engine).
PREDICTION_TOLERANCE = 0.35
PREDICTED_SYSTEMS: tuple[SystemName, ...] = ("continuous", "static")


@dataclass(frozen=True)
class Spread:
    """One workload's measured tok/s per system, and the ordering it shows."""

    workload: str
    tok_s: dict[SystemName, float]
    # Joules per generated token by system, where the run sampled its GPU (harness.analysis.energy).
    joules_per_token: dict[SystemName, float] = field(default_factory=dict)

    @property
    def ordered(self) -> bool:
        """continuous > static > naive."""
        return self.tok_s["continuous"] > self.tok_s["static"] > self.tok_s["naive"]

    def ratio(self, over: SystemName) -> float:
        return self.tok_s["continuous"] / self.tok_s[over]

    def summary(self) -> str:
        figures = ", ".join(f"{system} {self.tok_s[system]:,.0f}" for system in SYSTEMS)
        return f"{self.workload}: {figures} tok/s"

    def energy(self) -> str:
        """Joules per generated token by system (empty without GPU samples)."""
        if not self.joules_per_token:
            return ""
        figures = ", ".join(f"{system} {joules:.3f}" for system, joules in self.joules_per_token.items())
        return f"{self.workload}: {figures} J per generated token"


@dataclass(frozen=True)
class Deviation:
    """Measured against predicted tok/s for one system on one workload."""

    workload: str
    system: SystemName
    measured: float
    predicted: float

    @property
    def relative(self) -> float:
        """(measured - predicted) / predicted."""
        return self.measured / self.predicted - 1


def spreads(runs: Mapping[tuple[str, SystemName], Path]) -> list[Spread]:
    """Each workload's throughput per system from its run directories, keyed by (workload, system)."""
    measured = {key: metrics_for_run(load_run(path)) for key, path in runs.items()}
    return [
        Spread(workload, {system: measured[workload, system].total_tok_s for system in SYSTEMS},
               {system: gpu.joules_per_generated_token for system in SYSTEMS
                if (gpu := measured[workload, system].gpu) is not None})
        for workload in dict.fromkeys(workload for workload, _ in runs)
    ]


def deviations(setup: GpuSetup, specs: Sequence[WorkloadSpec], measured: Sequence[Spread],
               batch_size: int) -> list[Deviation]:
    """Measured against the setup's on-paper prediction, for continuous and static on each workload."""
    found = {spread.workload: spread for spread in measured}
    result = []
    for spec in specs:
        prediction = predict_workload(setup, spec, batch_size)
        predicted = {"continuous": prediction.continuous, "static": prediction.static}
        for system in PREDICTED_SYSTEMS:
            result.append(Deviation(spec.name, system, found[spec.name].tok_s[system],
                                    predicted[system].total_tokens_per_s))
    return result
