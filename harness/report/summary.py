"""summary.json: the report's numbers for machines, as plain JSON values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from harness.report.causes import keeps_small
from harness.report.facts import ReportFacts
from harness.report.gpu import gpu_note


def summary(facts: ReportFacts, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The gap table, findings, runs (with their GPU telemetry line), fitted step costs, the gap's causes and caveats.

    `extra` goes on top.
    """
    base = json_safe({
        "metadata": facts.metadata,
        "gap_table": facts.gap_table.to_dict(orient="records"),
        "acceptance": list(facts.findings),
        "runs": [
            {
                "run_id": run.data.manifest.run_id,
                "path": str(run.data.path),
                "workload": run.entry.workload,
                "level": run.entry.level,
                "system": run.entry.system,
                "batch_size": run.data.manifest.batch_size,
                "model": run.data.manifest.model,
                "started_at": run.data.manifest.started_at,
                "metrics": run.entry.metrics.to_flat_dict(),
                "gpu_telemetry": gpu_note(run.data.manifest),
                "predicted": asdict(run.entry.predicted) if run.entry.predicted else None,
            }
            for run in facts.runs
        ],
        # The key predates the name "step cost"; saved summaries are read by it.
        "step_models": [step_cost.model_dump() for step_cost in facts.extras.step_costs],
        "gap_causes": [
            {
                "level": level.level,
                "batch_size": level.batch_size,
                "against": causes.other,
                "measured_ratio": causes.measured_ratio,
                "schedule_ratio": causes.schedule_ratio,
                "with_growth_ratio": causes.with_growth_ratio,
                "modelled_ratio": causes.modelled_ratio,
                "growth_factor": causes.growth_factor,
                "prefill_factor": causes.prefill_factor,
                "prefill_share": causes.continuous.prefill_share,
                "keeps_it_small": keeps_small(causes),
            }
            for level in facts.gap_causes for causes in level.causes
        ],
        "caveats": facts.extras.caveats,
    })
    return base | json_safe(dict(extra or {}))


def json_safe(value: Any) -> Any:
    """Plain JSON values: NaN and infinities become null, numpy scalars Python ones."""
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
