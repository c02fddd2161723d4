"""The committed reference reproduction (reports/reference-cpu), as shipped in the package.

What a job needs of it without the checkout: where it ran (model, B, vLLM version), how
large its plans were, its step costs (which price a job's plans: harness.budget.probe)
and its headline ratios (which a report sets beside its own: harness.report.reference).
`reference.json` holds them; a test holds it to reports/reference-cpu/summary.json.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Any

REFERENCE_REPORT = "reports/reference-cpu"
REFERENCE_SUMMARY = f"{REFERENCE_REPORT}/summary.json"
# Made by `./reproduce` with its defaults: the command a user runs to compare with it.
REFERENCE_COMMAND = "./reproduce"
PACKAGED = "reference.json"


def reference_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the package keeps of a reference report's summary.json."""
    metadata = summary.get("metadata", {})
    runs = summary.get("runs") or []
    return {
        "source": REFERENCE_SUMMARY,
        "command": REFERENCE_COMMAND,
        "git_shas": metadata.get("git_shas"),
        "made": _made(runs),
        "models": metadata.get("models"),
        "vllm_versions": metadata.get("vllm_versions"),
        "batch_sizes": sorted({run.get("batch_size") for run in runs or [{}]}, key=str),
        "requests": dict(sorted({run["workload"]: run.get("metrics", {}).get("requests") for run in runs}.items())),
        "step_models": summary.get("step_models", []),
        "headline": [
            {"level": row["level"], "stable": row["stable"],
             "ratios": {name: estimate["median"] for name, estimate in row["ratios"].items()},
             "ratios_at_one_speed": {name: estimate["median"]
                                     for name, estimate in row.get("ratios_at_one_speed", {}).items()}}
            for row in summary.get("headline", [])
        ],
    }


def _made(runs: list[Mapping[str, Any]]) -> str | None:
    """The day (UTC) the reference's runs began; None for a summary without run times."""
    started = [run["started_at"] for run in runs if run.get("started_at") is not None]
    return datetime.fromtimestamp(min(started), UTC).strftime("%Y-%m-%d") if started else None


def packaged_reference() -> dict[str, Any]:
    """The reference's figures as shipped in the package (`harness/reference/reference.json`)."""
    return dict(json.loads(resources.files("harness.reference").joinpath(PACKAGED).read_text(encoding="utf-8")))


def same_setup(reference: Mapping[str, Any], server: Mapping[str, Any] | None, batch_size: int) -> bool:
    """Whether `server` (a run manifest's `server`) runs the reference's model at its B and vLLM version."""
    return (server is not None
            and reference.get("models") == [server.get("model")]
            and reference.get("vllm_versions") == [server.get("vllm_version")]
            and reference.get("batch_sizes") == [batch_size])
