"""Telling calibration runs apart: the endpoint says what it is, the run's manifest keeps it.

The calibration endpoint's model list says `owned_by: batchbench-calibration`. A run
against it records, in place of a launched server's info, a server block that says
`calibration_only` (and a server name of its own, so the results history never pools
it with a real server). The report then says, first, that such runs measure the client.
"""

from __future__ import annotations

from typing import Any

from harness.calibration.null_stream import CALIBRATION_OWNER
from harness.rundir.manifest import RunManifest

CALIBRATION_SERVER_NAME = "batchbench-calibration-null-stream (not a server)"


def is_calibration_owner(owned_by: str | None) -> bool:
    """True when a /v1/models entry's `owned_by` is the calibration endpoint's."""
    return owned_by == CALIBRATION_OWNER


def calibration_server_info() -> dict[str, Any]:
    """The manifest's `server` block for a run against the calibration endpoint."""
    return {"calibration_only": True, "vllm_distribution": CALIBRATION_SERVER_NAME, "vllm_version": "none"}


def is_calibration_run(manifest: RunManifest) -> bool:
    """True when the run was made against the calibration endpoint: it measured the client only."""
    return manifest.server is not None and manifest.server.calibration_only
