"""Calibrate a server: decode step time as a function of batch size, and prefill cost.

For each batch size b, a closed loop of b users sends 2b requests of one fixed length,
so b sequences decode side by side the whole time. The median TPOT (time per output
token after the first) of such a run is the step time at batch b, everything the
server does per step included (the API server's streaming too: on a small machine
that is part of the step). Prefill cost per prompt token is the slope of median TTFT
against the prompt tokens admitted together (b × prompt length).

This machine's speed drifts from second to second (a shared VM), so each batch size
is measured `CALIBRATION_REPETITIONS` times, interleaved, and the median taken; a
step that costs less at a larger batch is still noise, so the curve is made
non-decreasing (adjacent violators pooled), and the raw medians are kept beside it.

The fit is pure (`fit_calibration`); `calibration_specs` says what to run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.analysis.metrics import RunMetrics
from harness.analysis.rundir import CALIBRATION_FILE
from harness.analysis.simulate import StepTimeModel
from harness.errors import UsageError
from harness.workload import ClosedLoopArrival, FixedLength, WorkloadSpec

CALIBRATION_PROMPT_TOKENS = 64
CALIBRATION_OUTPUT_TOKENS = 128
CALIBRATION_REPETITIONS = 3


class Calibration(BaseModel):
    """The calibrated step-time curve, stored as calibration.json beside the runs."""

    model_config = ConfigDict(extra="forbid")

    points: dict[int, float] = Field(description="batch size -> seconds per decode step, made non-decreasing")
    raw_points: dict[int, float] = Field(description="batch size -> median over repetitions of median TPOT")
    prefill_s_per_token: float = Field(description="seconds of prefill per prompt token admitted")
    prompt_tokens: int = Field(description="prompt length of the calibration requests")
    output_tokens: int = Field(description="output length of the calibration requests")
    runs: list[str] = Field(description="run directories the curve was measured from")

    def step_model(self) -> StepTimeModel:
        """The curve as the simulator's step-time model."""
        return StepTimeModel.from_points(self.points, prefill_s_per_token=self.prefill_s_per_token)

    def save(self, directory: Path) -> Path:
        path = directory / CALIBRATION_FILE
        path.write_text(self.model_dump_json(indent=2))
        return path

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not a calibration file ({exc})".splitlines()[0]) from exc


def calibration_batch_sizes(max_batch: int) -> list[int]:
    """Powers of two below B, and B itself: 1, 2, 4, 8, 16 for B = 16."""
    sizes = [1]
    while sizes[-1] * 2 < max_batch:
        sizes.append(sizes[-1] * 2)
    return sorted(set(sizes + [max_batch]))


def calibration_specs(
    max_batch: int,
    prompt_tokens: int = CALIBRATION_PROMPT_TOKENS,
    output_tokens: int = CALIBRATION_OUTPUT_TOKENS,
) -> dict[int, WorkloadSpec]:
    """One closed-loop workload per batch size: b users, 2b requests of fixed lengths."""
    return {
        b: WorkloadSpec(
            name=f"calibrate-b{b}",
            description=f"calibration: {b} sequences decoding side by side",
            seed=0,
            num_requests=2 * b,
            prompt_tokens=FixedLength(value=prompt_tokens),
            output_tokens=FixedLength(value=output_tokens),
            arrival=ClosedLoopArrival(users=b),
        )
        for b in calibration_batch_sizes(max_batch)
    }


def fit_calibration(
    metrics: Mapping[int, Sequence[RunMetrics]],
    prompt_tokens: int,
    output_tokens: int,
    runs: Sequence[str] = (),
) -> Calibration:
    """Step time per batch size from median TPOT; prefill per token from the TTFT slope.

    `metrics` maps each batch size to the metrics of its repetitions.
    """
    if not metrics or not all(metrics.values()):
        raise UsageError("calibration: no runs to fit")
    sizes = sorted(metrics)
    raw = {b: float(np.median([m.tpot_s.p50 for m in metrics[b]])) for b in sizes}
    bad = [b for b, t in raw.items() if not np.isfinite(t) or t <= 0]
    if bad:
        raise UsageError(f"calibration: no usable TPOT at batch size(s) {bad}")
    admitted = np.array([b * prompt_tokens for b in sizes], dtype=float)
    ttft = np.array([np.median([m.ttft_s.p50 for m in metrics[b]]) for b in sizes], dtype=float)
    slope = float(np.polyfit(admitted, ttft, 1)[0]) if len(sizes) >= 2 else 0.0
    return Calibration(
        points=dict(zip(sizes, non_decreasing([raw[b] for b in sizes]))),
        raw_points=raw,
        prefill_s_per_token=max(slope, 0.0),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        runs=list(runs),
    )


def non_decreasing(values: Sequence[float]) -> list[float]:
    """The closest non-decreasing sequence in least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for value in values:
        blocks.append([value, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return [total / count for total, count in blocks for _ in range(count)]
