"""The report's GPU section: energy per token, power, utilisation and memory headroom per run.

Lays out the figures of harness.analysis.energy; where no run read a GPU, the section
is one line saying why (each run's manifest carries the reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.document import Block, Bullets, Heading, Paragraph, Table
from harness.report.facts import ReportRun, unique
from harness.report.format import num, pct
from harness.rundir.manifest import RunManifest

ABSENT_PREFIX = "no GPU telemetry: "
RECORDED_BEFORE = ABSENT_PREFIX + "recorded before batchbench read GPUs"


def gpu_note(manifest: RunManifest) -> str:
    """The run's one line on GPU telemetry: what was read, or why nothing was."""
    return manifest.gpu_telemetry.note if manifest.gpu_telemetry is not None else RECORDED_BEFORE


def gpu_section(runs: Sequence[ReportRun]) -> list[Block]:
    """A table of the runs' GPU figures, and a line for each run without them; one line when none has them."""
    blocks: list[Block] = [Heading("GPU energy and memory")]
    measured = [run for run in runs if run.entry.metrics.gpu is not None]
    absent = [run for run in runs if run.entry.metrics.gpu is None]
    if not measured:
        reasons = unique(gpu_note(run.data.manifest).removeprefix(ABSENT_PREFIX) for run in runs)
        return [*blocks, Paragraph(f"No GPU telemetry: {'; '.join(reasons)}.")]
    blocks += [
        Paragraph(
            "Read through NVML beside the engine's steps, over each run's makespan. Energy comes from NVML's energy "
            "counter where every GPU has one, else from its sampled power integrated over time (the source column "
            "says which); J / token divides it by the generated tokens (padding included). Memory is the GPU with "
            "the least headroom: its peak use (every process's) and what was left of its total."
        ),
        Table(
            ("run", "system", "level", "GPUs", "energy J", "source", "J / generated token", "mean power W",
             "mean utilisation", "peak memory GiB", "total GiB", "headroom GiB", "read errors"),
            tuple(_row(run) for run in measured),
        ),
    ]
    if absent:
        blocks.append(Bullets(tuple(f"{run.data.manifest.run_id}: {gpu_note(run.data.manifest)}" for run in absent)))
    return blocks


def _row(run: ReportRun) -> tuple[str, ...]:
    gpu = run.entry.metrics.gpu
    assert gpu is not None
    return (
        run.data.manifest.run_id, run.entry.system, str(run.entry.level), str(gpu.gpus), num(gpu.energy_j),
        gpu.energy_source or "unknown", num(gpu.joules_per_generated_token), num(gpu.mean_power_w),
        pct(gpu.mean_utilization), num(gpu.peak_memory_used_gib), num(gpu.memory_total_gib),
        num(gpu.memory_headroom_gib), str(gpu.read_errors),
    )
