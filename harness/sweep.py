"""A sweep: many (system, workload) runs against one server, plus its calibration.

A sweep over spread levels is just a list of specs; each becomes one run directory
named `<system>-<workload>[-rN]` under the sweep's runs directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analysis.metrics import metrics_for_run
from harness.analysis.rundir import load_run
from harness.calibration import CALIBRATION_REPETITIONS, Calibration, calibration_specs, fit_calibration
from harness.driver.endpoint import EndpointInfo, warm_up
from harness.driver.runner import RunRequest, execute
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.workload import WorkloadSpec


@dataclass(frozen=True)
class SweepTarget:
    """The server a group of runs goes to, and what the runs need to talk to it."""

    endpoint: EndpointInfo
    tokenizer: Any
    batch_size: int
    server: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


def run_cells(
    target: SweepTarget,
    cells: Sequence[tuple[str, WorkloadSpec]],
    runs_dir: Path,
    repetitions: int,
    progress: Callable[[str], None],
) -> list[Path]:
    """Run each (system, spec) `repetitions` times; return the run directories.

    Repetitions are interleaved (every cell once, then every cell again), so a drift
    of the machine's speed lands on every cell alike instead of on one of them.
    """
    headers = target.headers or {}
    warm_up(target.endpoint, headers, target.batch_size, "hello " * 8, DEFAULT_STALL_TIMEOUT_S)
    made = []
    for rep in range(repetitions):
        for system, spec in cells:
            suffix = f"-r{rep + 1}" if repetitions > 1 else ""
            out = runs_dir / f"{system}-{spec.name}{suffix}"
            progress(f"[{system}] {spec.name}{suffix}")
            execute(_request(target, spec, system, out, progress))
            made.append(out)
    return made


def calibrate(target: SweepTarget, runs_dir: Path, progress: Callable[[str], None]) -> Calibration:
    """Measure step time at batch sizes 1..B on the target; save calibration.json in runs_dir."""
    specs = calibration_specs(target.batch_size)
    metrics: dict[int, list] = {batch: [] for batch in specs}
    dirs: list[str] = []
    # Repetitions interleaved (1, 2, 4, ..., B, 1, 2, ...) so drift spreads over every size.
    for rep in range(CALIBRATION_REPETITIONS):
        for batch, spec in specs.items():
            out = runs_dir / "calibration" / f"{spec.name}-r{rep + 1}"
            progress(f"[calibrate] batch {batch}, repetition {rep + 1}")
            execute(_request(target, spec, "continuous", out, progress, warmup=not dirs))
            metrics[batch].append(metrics_for_run(load_run(out)))
            dirs.append(str(out.relative_to(runs_dir)))
    first = next(iter(specs.values()))
    calibration = fit_calibration(
        metrics, first.prompt_tokens.value, first.output_tokens.value, runs=dirs
    )
    calibration.save(runs_dir)
    curve = ", ".join(f"b={b}: {t * 1000:.2f} ms" for b, t in calibration.raw_points.items())
    progress(f"[calibrate] step time {curve}; prefill {calibration.prefill_s_per_token * 1e6:.1f} us/token")
    return calibration


def _request(
    target: SweepTarget,
    spec: WorkloadSpec,
    system: str,
    out: Path,
    progress: Callable[[str], None],
    warmup: bool = False,
) -> RunRequest:
    # The sweep warms the server once; each run then starts on compiled shapes.
    return RunRequest(
        spec=spec,
        system=system,
        batch_size=target.batch_size,
        endpoint=target.endpoint,
        tokenizer=target.tokenizer,
        out_dir=out,
        headers=target.headers or {},
        server=target.server,
        warmup=warmup,
        progress=lambda line: progress(f"    {line}"),
    )
