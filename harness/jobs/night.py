"""A night: a suite's runs appended to the history, gated against the last accepted nights, trended.

What a night does, in order, is harness.nightly.night's; this job owns its settings, the
night directory and the history it writes to, and hands back the verdict with the trend
report's path. Where the verdict is also published (JUnit, JSON, Markdown) is the
command's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from harness.jobs.fields import WORKERS_HELP, OutDir, Workers
from harness.jobs.stages import default_out
from harness.settings import Settings
from workloads import list_builtin_suites

if TYPE_CHECKING:
    from harness.gate.compare import GateResult

logger = logging.getLogger(__name__)


class Night(BaseModel):
    """What one night runs: its settings, their defaults and ranges (the command's flags come from here)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite: str = Field(description=f"suite file, or a shipped suite: {', '.join(list_builtin_suites())}")
    out: OutDir | None = Field(None, description="night directory (default: reports/nightly-<suite>-<date>-<host>)")
    accept: bool = Field(
        False, description="accept tonight into future baselines whatever the verdict (after an intended change of"
        " throughput)",
    )
    workers: Workers = Field(1, description=WORKERS_HELP)
    # The results history the night is appended to and gated against; None: the environment's.
    history: Path | None = Field(None, json_schema_extra={"cli": False})


@dataclass(frozen=True)
class NightOutcome:
    """How the night ended: the gate's verdict, where its trend report is, and what it appended."""

    result: GateResult
    trend_page: Path
    repetitions: int
    extra_repetitions: int


def run_nightly(job: Night) -> NightOutcome:
    """Run the night `job` names, append it to the history, gate it and write its trend report.

    Refuses bad input (UsageError) before a server starts. Drives load: the process must
    be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched

    require_patched("harness.jobs.night")
    from harness.driver.distributed.shard import cluster_spec
    from harness.driver.runner import require_new_dir
    from harness.history import HistoryStore
    from harness.nightly.changes import require_otava
    from harness.nightly.night import run_night
    from harness.nightly.suite import load_suite
    from harness.nightly.trend import trend_blocks, trend_title
    from harness.report.render import write_blocks
    from harness.sweep.runs import check_sweep_workers

    require_otava()  # before any run: the trend at the end needs it
    loaded = load_suite(job.suite)
    cluster = cluster_spec(job.workers)
    check_sweep_workers(loaded.specs, loaded.suite.systems, loaded.suite.server.max_num_seqs, cluster)
    out = job.out or default_out(f"nightly-{loaded.suite.name}-")
    require_new_dir(out, "night directory")
    # Opened (and checked) before any server starts: a bad history file costs nothing.
    store = HistoryStore(job.history or Settings.from_env().history_path)
    night = run_night(loaded, out, store, job.accept, cluster)
    history = {}
    for config in night.result.configs:
        tonight = next(row for row in night.repetitions if row.config_key == config.config_key)
        history[config.config_key] = store.comparable(config.config_key, hardware_key=tonight.hardware_key,
                                                      server=tonight.server)
    _, page, _ = write_blocks(trend_blocks(loaded.suite.name, night.result, history, night.untested_vllm), out,
                              trend_title(loaded.suite.name, night.untested_vllm), "trend")
    logger.info(f"{len(night.repetitions)} repetitions ({night.extra_repetitions} extra) appended to {store.path}")
    return NightOutcome(night.result, page, len(night.repetitions), night.extra_repetitions)
