"""What was measured, in the few lines a reader needs before the answer: model, server
build, machine, B per system, each level's plan (its true mean output), arrivals, the
static rule and the repetitions. Read from the runs' manifests and plans; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analysis.levels import Level, is_cap, level_name, level_order
from harness.report.facts import run_metadata, unique
from harness.rundir.manifest import RunManifest
from harness.systems import ALL_SYSTEMS
from launchers.models import parse_profile_argument


@dataclass(frozen=True)
class MeasuredRun:
    """One run as the setup lines read it: its level, manifest and planned output lengths."""

    level: Level
    manifest: RunManifest
    planned_outputs: tuple[int, ...]
    # Whether the run has the engine's step log (a server launched here that records steps).
    engine_log: bool = True


def measured_runs(runs: Sequence[Any]) -> list[MeasuredRun]:
    """MeasuredRun of each run that has `.entry.level` and `.data` (manifest and plan)."""
    return [
        MeasuredRun(run.entry.level, run.data.manifest,
                    tuple(int(r["output_tokens"]) for r in run.data.plan["requests"]) if run.data.plan else (),
                    run.data.steps is not None)
        for run in runs
    ]


def setup_lines(runs: Sequence[MeasuredRun]) -> list[str]:
    """The setup in a few lines: what ran, where, at which B, on which plans."""
    if not runs:
        return []
    manifests = [run.manifest for run in runs]
    metadata = run_metadata(manifests)
    lines = [
        *stack_lines(manifests),
        "B: " + batch_sizes(runs),
        "plans: " + "; ".join(plan_lines(runs)),
    ]
    if metadata["static_admission"]:
        lines.append("static: " + "; ".join(metadata["static_admission"]))
    lines.extend(engine_log_lines(runs))
    lines.append(repetitions_line(runs))
    return lines


def stack_lines(manifests: Sequence[RunManifest]) -> list[str]:
    """The model (with its shape) and the server build on its machine, one line each."""
    servers = ", ".join(run_metadata(manifests)["servers"])
    return [_model_line(manifests), f"server: {servers} on {_machines(manifests)}"]


def model_and_machine_lines(manifests: Sequence[RunManifest]) -> list[str]:
    """The model (with its shape) and the machine, one line each: for two builds compared on both."""
    return [_model_line(manifests), f"machine: {_machines(manifests)}"]


def _model_line(manifests: Sequence[RunManifest]) -> str:
    return "model: " + "; ".join(model_description(model) for model in run_metadata(manifests)["models"])


def _machines(manifests: Sequence[RunManifest]) -> str:
    hosts = "; ".join(f"{h['hostname']} ({h['cpu']}, {h['cores']} cores, {h['memory_gib']} GiB)"
                      for h in run_metadata(manifests)["hosts"])
    gpus = unique(", ".join(m.gpu_telemetry.devices) for m in manifests if m.gpu_telemetry and m.gpu_telemetry.devices)
    return hosts + (f", GPUs {'; '.join(gpus)}" if gpus else "")


def model_description(model: str) -> str:
    """A model as served, with its shape where it is one of the built-in profiles."""
    profile = parse_profile_argument(model)
    return f"{model}: {profile.description}" if profile is not None else model


def batch_sizes(runs: Sequence[MeasuredRun]) -> str:
    """B per system, in one phrase: "16 for every system", or each system's B by level where they differ."""
    by_system: dict[str, dict[Level, int]] = {}
    for run in runs:
        by_system.setdefault(run.manifest.system, {})[run.level] = run.manifest.batch_size
    sizes = {b for levels in by_system.values() for b in levels.values()}
    if len(sizes) == 1:
        return f"{sizes.pop()} for every system (admission is the only difference)"
    parts = []
    for system in sorted(by_system, key=_system_order):
        levels = by_system[system]
        if len(set(levels.values())) == 1:
            parts.append(f"{system} {next(iter(levels.values()))}")
        else:
            ordered = sorted(levels, key=level_order)
            parts.append(f"{system} {'/'.join(str(levels[level]) for level in ordered)}"
                         f" ({'/'.join(level_name(level) for level in ordered)})")
    return "; ".join(parts)


def plan_lines(runs: Sequence[MeasuredRun]) -> list[str]:
    """Each level's plan: what every level shares (prompts, output law, arrivals) said once, first."""
    levels = _levels(runs)
    specs = {level: next(run for run in runs if run.level == level).manifest.workload.model_dump(mode="json")
             for level in levels}
    shapes = {level: _shape(spec, with_cap=False) for level, spec in specs.items()}
    shared = len(set(shapes.values())) == 1
    lines = []
    if shared:
        capped = " drawn again above the cap" if all(is_cap(level) for level in levels) else ""
        lines.append(f"{shapes[levels[0]]}{capped}")
    for level in levels:
        members = [run for run in runs if run.level == level]
        outputs = [tokens for run in members for tokens in run.planned_outputs]
        mean = f", mean output {sum(outputs) / len(outputs):.0f} tokens" if outputs else ""
        requests = unique(len(run.planned_outputs) for run in members if run.planned_outputs)
        count = "/".join(map(str, requests)) if requests else str(specs[level].get("num_requests") or "?")
        shape = "" if shared else f" ({_shape(specs[level], with_cap=True)})"
        lines.append(f"{level_name(level)}: {count} requests{shape}{mean}")
    return lines


def _shape(spec: Mapping[str, Any], with_cap: bool) -> str:
    """A plan's arrivals, prompts and output law in a phrase."""
    trace = spec.get("trace")
    if trace:
        rate = f", replayed at {trace['rate']:g} requests/s" if trace.get("rate") else ""
        return f"the trace {Path(trace['path']).name}'s arrivals, prompts and outputs{rate}"
    prompt = spec.get("prompt_tokens") or {}
    prompts = f"{prompt['value']}-token prompts" if prompt.get("kind") == "fixed" else f"{prompt.get('kind')} prompts"
    output = spec.get("output_tokens") or {}
    law = str(output.get("kind", "?"))
    if law == "exponential":
        law = f"exponential of scale {output.get('mean'):g}"
        if with_cap and output.get("cap"):
            law += f" drawn again above {output['cap']}"
    arrival = (spec.get("arrival") or {}).get("kind", "?")
    sent = "all sent at once" if arrival == "burst" else f"{arrival} arrivals"
    return f"{sent}, {prompts}, outputs {law}"


def engine_log_lines(runs: Sequence[MeasuredRun]) -> list[str]:
    """Which systems' figures are the client's only, having no engine step log; none where every run has one."""
    bare = {run.manifest.system: run for run in runs if not run.engine_log}
    if not bare:
        return []
    why = {system: "a server batchbench did not launch" if run.manifest.server is None
           else "its server records no engine steps" for system, run in bare.items()}
    if len({run.manifest.system for run in runs}) == len(bare) and len(set(why.values())) == 1:
        return [f"engine step log: none ({next(iter(why.values()))}): every figure is the client's"]
    systems = sorted(bare, key=_system_order)
    return [f"engine step log: none for {', '.join(f'{system} ({why[system]})' for system in systems)}: their"
            " figures are the client's"]


def repetitions_line(runs: Sequence[MeasuredRun]) -> str:
    """How many repetitions of each cell, in one phrase."""
    per_cell: dict[tuple[str, Level], int] = {}
    for run in runs:
        key = (run.manifest.system, run.level)
        per_cell[key] = per_cell.get(key, 0) + 1
    counts = sorted(set(per_cell.values()))
    return f"repetitions: {'/'.join(map(str, counts))} of every system at every level"


def _levels(runs: Sequence[MeasuredRun]) -> list[Level]:
    return sorted({run.level for run in runs}, key=level_order)


def _system_order(system: str) -> int:
    return ALL_SYSTEMS.index(system) if system in ALL_SYSTEMS else len(ALL_SYSTEMS)
