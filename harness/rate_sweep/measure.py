"""A rate sweep's runs as they finish, turned into points and a result (reads run directories)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis.engine import step_seconds
from harness.analysis.metrics import request_table
from harness.rate_sweep.curve import SloSeconds
from harness.rate_sweep.grid import offered_rate, saturation_rate
from harness.rate_sweep.point import RatePoint, measure_point, measured_window
from harness.rate_sweep.predict import PredictedPoint, predict_points
from harness.rate_sweep.report import write_rate_report
from harness.rate_sweep.result import RateSweepResult, ScheduleSettings, SweepSettings, cdf_rate, system_result
from harness.report.setup import stack_lines
from harness.rundir.manifest import untested_vllm
from harness.rundir.reader import RunData, load_run


class SweepMeasurements:
    """The sweep's bursts and points so far, and the report they make."""

    def __init__(self, workload: str, batch_size: int, slo: SloSeconds, warmup_s: float, measure_s: float,
                 static_batch_wait_s: float | None, schedule: ScheduleSettings) -> None:
        self.workload, self.batch_size, self.slo = workload, batch_size, slo
        self.warmup_s, self.measure_s, self.static_batch_wait_s = warmup_s, measure_s, static_batch_wait_s
        self.schedule = schedule
        self.saturations: dict[str, float] = {}
        self.points: list[RatePoint] = []
        self._runs: dict[tuple[str, float], RunData] = {}
        self._loaded: list[RunData] = []
        self._decode_steps: list[np.ndarray] = []

    def add_run(self, path: Path) -> None:
        """A run of the sweep, a burst or a run at one rate (told apart by its workload's arrivals)."""
        run = load_run(path, allow_partial=True)
        if run.manifest.arrival_kind == "burst":
            self._add_burst(run)
        else:
            self._add_point(run)

    def add_burst(self, path: Path) -> None:
        """A system's saturation burst."""
        self._add_burst(load_run(path, allow_partial=True))

    def add_point(self, path: Path) -> RatePoint:
        """A run at one rate (Poisson arrivals, or a trace scaled to it)."""
        return self._add_point(load_run(path, allow_partial=True))

    def _add_burst(self, run: RunData) -> None:
        self.saturations[run.manifest.system] = saturation_rate(run.records)
        self._note_steps(run)
        self._loaded.append(run)

    def saturation(self, system: str) -> float:
        """Requests/s `system`'s burst was served at (NaN when it has none)."""
        return self.saturations.get(system, math.nan)

    def _add_point(self, run: RunData) -> RatePoint:
        rate = offered_rate(run.manifest.workload)
        point = measure_point(run.manifest.system, rate, run.records, run.tokens, run.steps, self.warmup_s)
        self.points.append(point)
        self._runs[(point.system, rate)] = run
        self._note_steps(run)
        self._loaded.append(run)
        return point

    def result(self) -> RateSweepResult:
        """The findings of the runs so far, each Poisson run predicted from the others."""
        predicted = predict_points(self._loaded, self.warmup_s, self.static_batch_wait_s)
        points = [self._with_prediction(point, predicted) for point in self.points]
        systems = tuple(system_result(system, self.saturation(system),
                                      [point for point in points if point.system == system], self.slo)
                        for system in dict.fromkeys([*self.saturations, *(p.system for p in self.points)]))
        rate = cdf_rate(systems)
        cdf = {system: self._e2e(system, rate) for system in (s.system for s in systems)} if rate else {}
        decode = np.concatenate(self._decode_steps) if self._decode_steps else np.array([])
        settings = SweepSettings(self.workload, self.batch_size, self.slo, self.warmup_s, self.measure_s,
                                 self.static_batch_wait_s, float(np.median(decode) * 1e3) if decode.size else math.nan,
                                 self.schedule, self._trace(),
                                 any(run.steps is not None and not run.steps.empty for run in self._loaded),
                                 tuple(stack_lines([run.manifest for run in self._loaded])) if self._loaded else ())
        return RateSweepResult(settings, systems, rate, {k: v for k, v in cdf.items() if v.size},
                               tuple(untested_vllm(run.manifest.server for run in self._loaded)))

    def write(self, out: Path, stage: str | None = None) -> tuple[Path, Path, Path]:
        """Write the report of the runs so far."""
        return write_rate_report(self.result(), out, stage)

    def _trace(self) -> str | None:
        traces = {run.manifest.workload.trace.path.name for run in self._loaded if run.manifest.workload.trace}
        return ", ".join(sorted(traces)) or None

    def _with_prediction(self, point: RatePoint, predicted: dict[str, PredictedPoint]) -> RatePoint:
        prediction = predicted.get(self._runs[(point.system, point.offered_rate)].manifest.run_id)
        if prediction is None:
            return point
        return replace(point, predicted_e2e_p50_s=prediction.e2e_p50_s, predicted_ttft_p50_s=prediction.ttft_p50_s,
                       run_speed=prediction.run_speed,
                       predicted_e2e_p50_at_run_speed_s=prediction.e2e_p50_at_run_speed_s)

    def _e2e(self, system: str, rate: float) -> np.ndarray:
        run = self._runs.get((system, rate))
        if run is None:
            return np.array([])
        return request_table(measured_window(run.records, self.warmup_s), run.tokens)["e2e_s"].to_numpy(dtype=float)

    def _note_steps(self, run: RunData) -> None:
        """Keep the continuous engine's decode-only steps at a full batch: the step time beside the figures."""
        if run.steps is None or run.manifest.system != "continuous" or run.steps.empty:
            return
        steps: pd.DataFrame = run.steps
        seconds = step_seconds(steps)
        ordered = steps.sort_values("t_s")
        full = ((ordered["running"] == self.batch_size) & (ordered["prefill_tokens"] == 0)).to_numpy()
        self._decode_steps.append(seconds[full])
