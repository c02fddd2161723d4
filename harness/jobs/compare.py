"""Two server builds, A and B, on the same machine and workloads: is B slower? (`batchbench compare`)

A build is a vLLM environment (`server_python`) with its arguments (`vllm_args`,
`server_env`): two releases, a release and a patched one, or one install with two sets of
flags. Both sides serve the same model at the same B; each side's servers start once and
stay up, and every (workload, system) runs on A and on B in turn, A B then B A in the next
repetition (harness.sweep.runs.iter_runs' `alternate`), so a drift of the machine lands on
both. Repetition i of A and repetition i of B form pair i.

B is judged against A on measured figures only: the engine's own total tok/s where both
runs have an engine step log, else the client's (harness.compare.statistics). Never on a
ratio "at one speed": that prices both builds' steps with one step-cost model, which
cancels the very step cost an upgrade changes. The engine's step logs then say what
changed (harness.compare.explain).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.compare import DEFAULT_PAIR_NOISE, DEFAULT_THRESHOLD
from harness.errors import UsageError
from harness.jobs.fields import MAX_REPETITIONS, Positive, WorkloadNames
from harness.jobs.stages import default_out
from harness.systems import SERVER_MODE, SYSTEMS, SystemName, modes_for
from harness.workload.limits import Share
from launchers.spec import ServerConfig

if TYPE_CHECKING:
    from harness.compare.result import ComparisonResult
    from harness.sweep.runs import FinishedRun

logger = logging.getLogger(__name__)

# The narrowest and the widest spread of the reproduction, as the CPU nightly gates them.
DEFAULT_WORKLOADS = ("cpu-anyscale-cap128", "cpu-anyscale-cap1536")
DEFAULT_REPETITIONS = 5
Side = Literal["a", "b"]
SIDES: tuple[Side, ...] = ("a", "b")
# Under the report directory, each side's runs: runs/<side>-<system>-<workload>-r<N> (the name is the run's
# id, which must differ between the sides); its servers: <side>/servers.
RUNS_DIR = "runs"


class Comparison(BaseModel):
    """What one A/B comparison runs: its settings, their defaults and ranges (the command's flags come from here)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workloads: WorkloadNames = Field(
        DEFAULT_WORKLOADS, description="comma-separated workload files or names")
    # Plain names on the command line (a comma-separated flag), checked against SYSTEMS below.
    systems: Annotated[tuple[str, ...], Field(min_length=1)] = Field(
        ("continuous", "static"), description=f"systems measured on each build: any of {', '.join(SYSTEMS)}")
    repetitions: Positive = Field(
        DEFAULT_REPETITIONS, ge=2, le=MAX_REPETITIONS,
        description="pairs per (workload, system): runs on A and on B, interleaved A B, B A, ...")
    requests: Positive | None = Field(
        None, description="requests of every workload's plan (default: each workload's own count)")
    threshold: Share = Field(
        DEFAULT_THRESHOLD, description="smallest drop of B below A called a regression (a share: 0.03 is 3%)")
    pair_noise: Share = Field(
        DEFAULT_PAIR_NOISE, description="the spread of log(B/A) expected of one pair on this machine, for the"
        " detectable drop stated before the runs (the report states it again from the noise measured)")
    out: Path | None = Field(None, description="report directory (default: reports/compare-<date>-<host>)")

    @field_validator("systems")
    @classmethod
    def _vllm_systems(cls, systems: tuple[str, ...]) -> tuple[str, ...]:
        other = [system for system in systems if system not in SYSTEMS]
        if other:
            raise ValueError(f"{', '.join(other)}: compare measures vLLM's systems, {', '.join(SYSTEMS)}")
        if len(set(systems)) != len(systems):
            raise ValueError(f"systems repeat: {', '.join(systems)}")
        return systems


class BuildArguments(BaseModel):
    """What sets one side apart, on top of the server flags both share (the command's --a-* and --b-* flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server_python: str | None = Field(
        None, description="the Python of this side's vLLM environment (default: the shared --server-python)")
    vllm_args: tuple[str, ...] = Field(
        (), description="vLLM arguments of this side only, after the shared ones",
        json_schema_extra={"repeatable": True})
    server_env: tuple[str, ...] = Field(
        (), description="NAME=VALUE for this side's server only, after the shared ones",
        json_schema_extra={"repeatable": True})

    def applied_to(self, shared: ServerConfig) -> ServerConfig:
        """`shared` with this side's environment and arguments (validated: UsageError on a bad value)."""
        from launchers.spec import as_usage_error

        values = shared.model_dump() | {
            "server_python": self.server_python or shared.server_python,
            "vllm_args": (*shared.vllm_args, *self.vllm_args),
            "server_env": (*shared.server_env, *self.server_env),
        }
        try:
            return ServerConfig(**values)
        except ValidationError as exc:
            raise as_usage_error(exc, "server") from exc


@dataclass(frozen=True)
class Build:
    """One side of a comparison: its name in the report, its server configuration, and its vLLM as probed."""

    side: Side
    config: ServerConfig
    python: str
    vllm: str
    environment: str

    @property
    def label(self) -> str:
        """The build as the report names it: vLLM, environment, and the arguments that set it apart."""
        extra = " ".join([*self.config.vllm_args, *self.config.server_env])
        return f"{self.vllm} ({self.environment})" + (f" {extra}" if extra else "")


def check_sides(a: ServerConfig, b: ServerConfig) -> tuple[Build, Build]:
    """Both builds as probed in their own environments, refused in one line (UsageError) before anything starts.

    Refused: an interpreter that is missing, not a Python, without vLLM, or with a vLLM outside
    the tested releases (without its override); two sides of another model or B.
    """
    from harness.settings import Settings
    from launchers.server import interpreter, probe_vllm

    for field in ("model", "max_num_seqs"):
        if getattr(a, field) != getattr(b, field):
            raise UsageError(f"A and B differ in {field} ({getattr(a, field)} against {getattr(b, field)}): a"
                             " comparison of two builds runs the same model at the same B on both")
    default_python = Settings.from_env().server_python
    builds = []
    for side, config in zip(SIDES, (a, b), strict=True):
        try:
            python = interpreter(config.server_python or default_python)
            vllm = probe_vllm(python)
            vllm.checked(config.allow_untested_vllm)
        except UsageError as exc:
            raise UsageError(f"build {side.upper()}: {exc}") from None
        builds.append(Build(side, config, python, vllm.name, vllm.environment))
    return builds[0], builds[1]


def compare(job: Comparison, a: ServerConfig, b: ServerConfig) -> ComparisonResult:
    """Run A and B on the job's workloads, judge B against A, and write the report.

    Bad input (UsageError) is refused before a server starts. Drives load: the process must
    be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched

    require_patched("harness.jobs.compare")
    from harness.driver.runner import require_new_dir
    from harness.workload import load_specs

    specs = load_specs(list(job.workloads))
    if job.requests is not None:
        specs = [spec.model_copy(update={"num_requests": job.requests}) for spec in specs]
    conversations = [spec.name for spec in specs if spec.trace is not None and spec.trace.conversation is not None]
    if conversations and "naive" in job.systems:
        raise UsageError(f"{', '.join(conversations)}: a conversation cannot be sent in naive's padded waves")
    builds = check_sides(a, b)
    out = job.out or default_out("compare-")
    require_new_dir(out, "report directory")
    from harness.compare.statistics import detectable_drop

    expected = detectable_drop(job.repetitions, job.pair_noise, job.threshold)
    logger.info(f"A: {builds[0].label}")
    logger.info(f"B: {builds[1].label}")
    logger.info(f"{job.repetitions} pairs per (workload, system) at an expected pair noise of {job.pair_noise:.1%}:"
                f" a drop of B of {expected:.1%} or more is called a regression 4 times in 5"
                f" (threshold {job.threshold:.0%})")

    from harness.sweep.runs import SweepCell, iter_runs
    from harness.sweep.servers import run_targets

    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        modes = modes_for(cast(tuple[SystemName, ...], job.systems))
        targets = {build.side: run_targets(build.config, out / build.side, stack, modes=modes, workloads=specs)
                   for build in builds}
        # Each (workload, system) on A then B: with `alternate`, B then A in the next repetition.
        cells = [SweepCell(system, spec, targets[side][SERVER_MODE[cast(SystemName, system)]], prefix=f"{side}-")
                 for spec in specs for system in job.systems for side in SIDES]
        finished = list(iter_runs(cells, out / RUNS_DIR, job.repetitions, alternate=True))
    logger.info("judging B against A")
    result = _judge(builds, finished, job, expected)
    _write(result, out)
    logger.info(f"compared in {(time.monotonic() - began) / 60:.1f} min: {out / 'report.md'}")
    return result


def _judge(builds: tuple[Build, Build], finished: list[FinishedRun], job: Comparison,
           expected: float) -> ComparisonResult:
    """Every run assessed as the report assesses it, paired by (workload, system, repetition), and judged."""
    from harness.analysis.assess import assess_run_dirs
    from harness.compare.result import PairedRun, judge_comparison
    from harness.history.from_run import repetition_from_run
    from harness.report.setup import model_and_machine_lines

    assessment = assess_run_dirs([run.path for run in finished], allow_partial=True)
    runs = []
    for run, assessed in zip(finished, assessment.assessed, strict=True):
        row = repetition_from_run(assessed, source="run", invocation_id="compare", accepted=False)
        runs.append(PairedRun(run.cell.prefix.removesuffix("-"), run.repetition, row, assessed.data.steps))
    setup = tuple(model_and_machine_lines([assessed.data.manifest for assessed in assessment.assessed]))
    return judge_comparison(builds[0].label, builds[1].label, runs, job.threshold, job.pair_noise, expected, setup)


def _write(result: ComparisonResult, out: Path) -> None:
    from harness.compare.report import comparison_blocks, comparison_summary
    from harness.report.render import write_blocks

    write_blocks(comparison_blocks(result), out, "batchbench compare: B against A", "report")
    (out / "summary.json").write_text(json.dumps(comparison_summary(result), indent=2) + "\n")
