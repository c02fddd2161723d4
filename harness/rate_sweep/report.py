"""The rate sweep's report: report.md, a self-contained report.html and summary.json, headline first."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.rate_sweep.curve import KNEE_FACTOR
from harness.rate_sweep.defaults import EXTRA_RATE_FACTOR, TRUSTED_MEASURE_S
from harness.rate_sweep.plots import latency_curves_plot
from harness.rate_sweep.point import WAIT_GROWTH_LIMIT_S, RatePoint
from harness.rate_sweep.result import (
    STATIC_SYSTEMS,
    RateSweepResult,
    ScheduleSettings,
    SystemResult,
    queue_wait_ratio,
)
from harness.rate_sweep.schedule import MIN_BRACKET
from harness.report.document import Block, Bullets, Heading, Image, Paragraph, Table
from harness.report.format import num, pct, times, with_low
from harness.report.plots import latency_cdf_plot
from harness.report.render import write_blocks
from harness.report.untested import untested_title, untested_vllm_blocks

SUMMARY_FILE = "summary.json"


def write_rate_report(result: RateSweepResult, out: Path, stage: str | None = None) -> tuple[Path, Path, Path]:
    """Write the report into `out`; `stage` (e.g. "PRELIMINARY: ...") heads it when the sweep is unfinished.

    Returns (report.md, report.html, summary.json).
    """
    out.mkdir(parents=True, exist_ok=True)
    markdown, page, _ = write_blocks(_blocks(result, stage), out, _title(result), "report")
    summary = out / SUMMARY_FILE
    summary.write_text(json.dumps(_summary(result, stage), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return markdown, page, summary


def _title(result: RateSweepResult) -> str:
    return untested_title(f"Rate sweep: {result.settings.workload}", result.untested_vllm)


def _blocks(result: RateSweepResult, stage: str | None) -> list[Block]:
    settings = result.settings
    blocks: list[Block] = [Heading(_title(result), 1)]
    if stage:
        blocks.append(Paragraph(f"**{stage}**"))
    blocks += untested_vllm_blocks(result.untested_vllm)
    blocks.append(Paragraph(_headline(result)))
    blocks.append(Bullets(_setup(result)))
    blocks.append(Table(
        ("system", "saturation (req/s)", "knee (req/s)", "held under SLO (req/s)", "runs"),
        tuple((s.system, num(s.saturation_rps), _knee(s), _held(s), str(len(s.points))) for s in result.systems),
        table_id="rate-headline",
    ))
    knees = {s.system: s.knee_rps for s in result.systems}
    targets = {"ttft_p50_s": settings.slo.ttft_p50_s, "e2e_p99_s": settings.slo.e2e_p99_s}
    blocks.append(Image("latency-vs-rate",
                        latency_curves_plot({s.system: s.points for s in result.systems}, knees, targets),
                        "Latency against offered rate per system"))
    blocks.append(Heading("Predicted against measured"))
    blocks.append(Paragraph(_prediction_text(result)))
    if settings.engine_steps:
        blocks.append(Table(
            ("system", "offered (req/s)", "p50 E2E measured (s)", "predicted (s)", "measured vs predicted",
             "below knee", "run's steps vs the fit", "measured vs predicted at the run's speed"),
            tuple((s.system, num(p.offered_rate), num(p.e2e_p50_s), num(p.predicted_e2e_p50_s),
                   pct(p.prediction_error, signed=True), "yes" if _below_knee(s, p) else "no",
                   pct(p.run_speed - 1, signed=True), pct(p.prediction_error_at_run_speed, signed=True))
                  for s in result.systems for p in s.points),
            table_id="rate-predictions",
        ))
    blocks.append(Heading("Waits at the door"))
    blocks.append(Paragraph(_queue_text(result)))
    if result.cdf_rate is not None and result.cdf_e2e:
        blocks.append(Heading("Latency distribution below the knees"))
        title = f"E2E latency CDF at {result.cdf_rate:g} requests/s"
        blocks.append(Image("latency-cdf", latency_cdf_plot(result.cdf_e2e, title), title))
    blocks.append(Heading("Every run"))
    blocks.append(Table(
        ("system", "offered (req/s)", "planned (req/s)", "sent (req/s)", "late p99 (ms)", "requests", "failed",
         "p50 TTFT (s)", "p99 TTFT (s)", "p50 E2E (s) [95%]", "p99 E2E (s)", "p50 E2E/token (ms)", "p50 queue (s)",
         "queue growth (s) [95% low]", "kept up"),
        tuple(_point_row(s.system, point) for s in result.systems for point in s.points),
        table_id="rate-points",
    ))
    blocks.append(Heading("How it was measured"))
    blocks.append(Bullets(_method(result)))
    return blocks


def _headline(result: RateSweepResult) -> str:
    slo = result.settings.slo.describe()
    ratios = [f"**continuous holds {times(ratio)} the rate {other} holds**" for other in (*STATIC_SYSTEMS, "naive")
              if math.isfinite(ratio := result.held_ratio("continuous", other))]
    parts = [f"{'; '.join(ratios)} under the SLO ({slo})." if ratios else f"The SLO: {slo}."]
    parts.append("The highest offered rate each held under the SLO, interpolated between the rates run: "
                 + ", ".join(f"{s.system} {_held(s)} req/s" for s in result.systems) + ".")
    static = result.static_system
    knee = result.knee_ratio("continuous", static) if static else math.nan
    if math.isfinite(knee):
        parts.append(f"Knees (median E2E per output token at {KNEE_FACTOR:g}x its lowest-rate value, or the queue"
                     " growing):"
                     f" continuous/{static} {times(knee)}.")
    return " ".join(parts)


def _setup(result: RateSweepResult) -> tuple[str, ...]:
    """What was measured and how far to trust it, in a few lines before the details."""
    settings = result.settings
    runs = sum(len(s.points) for s in result.systems)
    fell_behind = sum(not p.keeps_up for s in result.systems for p in s.points)
    speed = ("read at one machine speed (How it was measured, below)" if settings.engine_steps else
             "read as measured: the server kept no engine step log here, so every figure is the client's, none is"
             " predicted, and the machine's speed from run to run is not told apart from the load's effect")
    return (
        *settings.stack,
        f"workload: {settings.workload} at B = {settings.batch_size}, {_arrivals_text(settings.trace)}; each rate"
        f" {settings.warmup_s:g} s of warm-up, then {settings.measure_s:g} s measured; {_static_text(result)}",
        f"trust: {runs} runs, {fell_behind} of them past where their queue kept up; the knee and the rate held are"
        f" interpolated between the rates run, and {speed}; each rate is one run, not repeated, so a held rate"
        " carries its run's draw and the machine's speed that minute (docs/validation/rate-sweep.md: how far they"
        " moved between sweeps)",
    )


def _static_text(result: RateSweepResult) -> str:
    """How the static batching swept was kept, and its batch delay."""
    batch_wait_s = result.settings.static_batch_wait_s
    if batch_wait_s is None:
        return "no static server was launched"
    wait = f"a batch forms when B requests wait or {batch_wait_s:g} s after the oldest arrived"
    if result.static_system == "client-static":
        return (f"static batching kept by the client (client-static, the server has no static mode): {wait}, and"
                " is sent once the previous one has ended")
    return f"static: {wait}"


def _below_knee(system: SystemResult, point: RatePoint) -> bool:
    return system.knee_rps is None or point.offered_rate < system.knee_rps


def worst_prediction_error(result: RateSweepResult, at_run_speed: bool = False) -> float:
    """The largest |measured / predicted - 1| of p50 E2E over the runs below their system's knee (NaN: none).

    `at_run_speed`: against the prediction at each run's own step speed instead of the held-out one.
    """
    errors = [abs(p.prediction_error_at_run_speed if at_run_speed else p.prediction_error)
              for s in result.systems for p in s.points if _below_knee(s, p)]
    errors = [error for error in errors if math.isfinite(error)]
    return max(errors) if errors else math.nan


def _prediction_text(result: RateSweepResult) -> str:
    if not result.settings.engine_steps:
        return ("No run is predicted: the prediction replays each run under a step cost fitted on the server's engine"
                " steps, and this server kept no engine step log here.")
    text = ("Each run's p50 E2E as the schedule simulator predicts it: the run's own plan and arrival times, replayed"
            " under a step cost fitted on the engine steps of the same server's other runs (its burst and its other"
            " rates), with static's max batch delay. The client's own overhead is not in the prediction."
            " The machine's speed moves between runs, which no fit on other runs can know: each run's own steps,"
            " from the end of its warm-up, are set against the fit (above 0: slower than it says), and the"
            " last column predicts again at that speed (one number from the run, none of its latencies).")
    worst, at_speed = worst_prediction_error(result), worst_prediction_error(result, at_run_speed=True)
    if math.isfinite(worst):
        text += f" Below the knees, the worst measured-vs-predicted difference is {pct(worst)}"
        text += f"; at each run's own speed, {pct(at_speed)}." if math.isfinite(at_speed) else "."
    return text


def _queue_text(result: RateSweepResult) -> str:
    name = result.static_system
    static, continuous = result.system(name) if name else None, result.system("continuous")
    text = ("Queue wait (the last panel above): from a request's send to the start of the engine step that first"
            " admitted it, read from the engine's step log. Under static batching a request that arrives while a"
            " batch runs waits for the whole batch to finish.")
    if not result.settings.engine_steps:
        text = ("Without an engine step log the wait at the door is read as TTFT: from a request's arrival to its"
                " first token, so it holds its prefill too. Under static batching a request that arrives while a"
                " batch runs waits for the whole batch to finish (under client-static, in the client, before it is"
                " sent).")
    if static is None or continuous is None:
        return text
    ratios = queue_wait_ratio(static, continuous)
    if not ratios:
        return text + f" {name}'s queue kept up at every rate of this grid."
    shown = ", ".join(f"{times(ratio)} at {rate:g} req/s" for rate, ratio in ratios.items())
    return text + f" Where {name}'s queue grew, its median queue wait over continuous's: {shown}."


def _arrivals_text(trace: str | None) -> str:
    if trace is None:
        return "Poisson arrivals"
    return (f"the trace {trace}'s own arrivals, its first rate x seconds rows compressed or stretched to that mean"
            " rate (the burst: its first rows at once)")


def _method(result: RateSweepResult) -> tuple[str, ...]:
    settings = result.settings
    items = [
        f"Each system first serves a burst; its saturation rate is the requests finished by the 90th percentile"
        f" finish over the time to it. The grid is set from continuous's. B = {settings.batch_size}.",
        f"Each rate: {_arrivals_text(settings.trace)}, {settings.warmup_s:g} s of warm-up (left out) then"
        f" {settings.measure_s:g} s measured; the grid's rates ascending, systems interleaved."
        f" {_schedule_text(settings.schedule)} Planned: the rate the plan's arrivals hold in the measured window;"
        " sent: the rate the client sent it at (below planned, and a late p99 of more than a few ms, when the client"
        " fell behind).",
        "A run did not keep up when its queue wait (else TTFT) grew over the measured window (Theil-Sen slope times"
        f" the window) by more than {num(WAIT_GROWTH_LIMIT_S)} s even at the low end of the slope's 95% interval."
        " Its latencies reflect the run's length, not the rate. The knee and the rate held are interpolated where"
        " the worst of their ratios to their limits (the queue's surest growth among them) crosses 1.",
        f"Static batching's admission (max batch delay): {_static_text(result)}.",
        f"Knee: the rate where the median normalized latency (E2E per output token) reaches {KNEE_FACTOR:g}x its"
        " value at the lowest rate, or the queue stops keeping up, whichever comes first. Each run's figure is"
        " read at the speed of the step cost fitted on the other runs (divided by its steps' speed against that"
        " fit, where known): the machine's speed moves from run to run, and the knee is the load's effect.",
    ]
    if math.isfinite(settings.decode_step_ms):
        items.append(f"The continuous engine's median decode step at a full batch of {settings.batch_size}:"
                     f" {settings.decode_step_ms:.1f} ms.")
    if settings.measure_s < TRUSTED_MEASURE_S:
        items.append(f"Runs measured {settings.measure_s:g} s of arrivals, under {TRUSTED_MEASURE_S:g} s: a check that"
                     " the sweep works, not a measurement.")
    return tuple(items)


def _schedule_text(schedule: ScheduleSettings) -> str:
    if not schedule.fell_behind_runs:
        return "Every system ran every rate."
    text = f"A system that fell behind at {schedule.fell_behind_runs} rates runs no higher one."
    if schedule.extra_rates:
        text += (f" Past the grid's top, up to {schedule.extra_rates} rates {EXTRA_RATE_FACTOR:g}x apart are added"
                 " while a system has crossed neither its knee nor its SLO.")
    if schedule.refine_runs:
        text += (f" Then each system runs up to {schedule.refine_runs} rates halfway between the two around its held"
                 f" rate (then its knee) while they are more than {MIN_BRACKET:.0%} apart.")
    return text


def _point_row(system: str, point: RatePoint) -> tuple[str, ...]:
    interval = f"{num(point.e2e_p50_s)} [{num(point.e2e_p50_low_s)}, {num(point.e2e_p50_high_s)}]"
    return (system, num(point.offered_rate), num(point.planned_rate), num(point.sent_rate),
            num(point.late_p99_s * 1e3), str(point.measured),
            str(point.failed), num(point.ttft_p50_s), num(point.ttft_p99_s), interval, num(point.e2e_p99_s),
            num(point.normalized_p50_s * 1e3),
            num(point.queue_wait_p50_s), with_low(point.wait_growth_s, point.wait_growth_low_s),
            "yes" if point.keeps_up else "**no**")


def _knee(result: SystemResult) -> str:
    return "beyond the grid" if result.knee_rps is None else num(result.knee_rps)


def _held(result: SystemResult) -> str:
    if result.held.bound == "below the grid":
        return "below the grid"
    prefix = ">= " if result.held.bound == "at least" else ""
    return prefix + num(result.held.rate)


def _summary(result: RateSweepResult, stage: str | None) -> dict[str, Any]:
    settings = result.settings
    return _finite({
        "kind": "rate-sweep",
        "stage": stage,
        "untested_vllm": list(result.untested_vllm),
        "workload": settings.workload,
        "batch_size": settings.batch_size,
        "slo": asdict(settings.slo),
        "warmup_s": settings.warmup_s,
        "measure_s": settings.measure_s,
        "static_batch_wait_s": settings.static_batch_wait_s,
        "decode_step_ms": settings.decode_step_ms,
        **asdict(settings.schedule),
        "engine_steps": settings.engine_steps,
        "held_ratio": {f"continuous/{other}": result.held_ratio("continuous", other)
                       for other in (*STATIC_SYSTEMS, "naive")},
        "knee_ratio": {f"continuous/{static}": result.knee_ratio("continuous", static)
                       for static in STATIC_SYSTEMS},
        "worst_prediction_error_below_knee": worst_prediction_error(result),
        "worst_prediction_error_below_knee_at_run_speed": worst_prediction_error(result, at_run_speed=True),
        "systems": {s.system: {"saturation_rps": s.saturation_rps, "knee_rps": s.knee_rps,
                               "held_rps": s.held.rate, "held_bound": s.held.bound,
                               "points": [{**asdict(point), "keeps_up": point.keeps_up,
                                           "prediction_error": point.prediction_error,
                                           "prediction_error_at_run_speed": point.prediction_error_at_run_speed}
                                          for point in s.points]}
                    for s in result.systems},
    })


def _finite(value: Any) -> Any:
    """JSON has no NaN: undefined figures are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
