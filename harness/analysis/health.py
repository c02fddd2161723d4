"""Is a run, and a cell of repeated runs, fit to be reported? The health verdict.

Pure functions, no I/O. A run, a cell or a headline row is UNSTABLE when any `unstable`
check fails; a `note` check is shown (a warning) but does not change the verdict. The
headline row judges what the report claims, the ratio between systems; no acceptance
line is drawn from an unstable row, and `reproduce` exits 3 when a headline row is
unstable.

The limits, and why (each matters on a 2-core machine: docs/process-layout.md,
docs/validation/process-layout.md):
- makespan >= 20 s: shorter runs swing by tens of percent between repetitions.
- send lateness p99 <= 20 ms: a client that sends late measures itself. For a burst
  (every request due at once) with the engine's step log at hand it is a note: putting
  hundreds of requests on the wire takes any client a few hundred ms, and what matters
  is whether the engine waited for them, which the front-end check measures. A burst
  without a step log (a server the harness did not launch) is judged on its lateness as
  a share of the run (BURST_SEND_SPREAD, at most 2%): a late send delays when a request
  can start, which moves the run's throughput by at most that share, a check of precision.
- front-end starvation <= 5% of the engine window (engine.front_end_starved_share):
  a batch slot free while a sent request had not reached the engine means the API
  server or the client set the pace, not the batching policy. Every burst starts so
  while the API server takes in a few hundred requests, a few percent at most of a
  run; a front end that sets the pace shows several times that
  (docs/validation/process-layout.md). 5% is also the precision a cell is held to.
- client event-loop lag p99 <= 20 ms, and client CPU share <= 0.9 of a core: a
  client short of CPU timestamps late and throttles the load. With the engine's step
  log at hand the lag is a note: the client-vs-engine agreement judges the figure.
- client-bound: CPU share above 0.9 of a core, or a median loop lag above 5% of the
  median inter-token time. A late timer is a late token timestamp, so a lag that is a
  visible share of the gaps being measured makes ITL and TPOT the client's. The
  inter-token time is the median request's TPOT (its mean gap), not the median of
  single gaps: coalesced chunks make most single gaps 0 on a starved API server, which
  would call every such run client-bound. Either check's words say "client-bound" and
  suggest more client processes (`--workers N`); `client_bound` lists them.
- client vs engine generated tok/s within 2%, and the same token count at both ends:
  otherwise the client's clock or stream, not the server, made the figure. Under open-loop
  (Poisson) arrivals the throughput is the offered rate, not a figure of the run, and the
  engine's window starts at its first step, which static's max batch delay holds back by
  up to its wait after the first arrival (1 s: 4% of a 25 s run): there the throughput
  disagreement is a note. The token count still has to agree.
- cell: its runs repeat within ±5% of their median (half their range; the interval shown
  beside it says how often it holds the true median), and >= 3 repetitions; the engine's
  steps say whether repetitions ran another schedule or the same one at another speed
  (machine_speed_check, with schedule_check's one rule). A spread cell gets a warning (a
  note) naming which: its absolute figure is not what the report claims, the ratios are.
- a run's check that bounds only its figure's precision (PRECISION_CHECKS: a run under
  20 s, client and engine throughput apart by at most the headline's ±5%) is a warning on
  that run in its cell and headline row: whether it moved the ratio is what the ratio's
  own repetitions show. Every other failed run check (tokens lost, the front end or the
  client setting the pace) leaves the cell and the row UNSTABLE.
- headline (headline_health), what the report claims, each ratio as shown:
  STABLE: its repetitions' ratios lie within ±5% of it (MAX_HEADLINE_HALF_WIDTH), with
  >= 3 repetitions and no run of its systems failing a check beyond precision;
  NOISY: they spread wider, and the same runs at one machine speed (harness.analysis.speed)
  repeat within ±5%: the schedules repeated and the machine's speed moved between runs, so
  the ratio's interval (its uncertainty, shown beside it) is to be read, not its point;
  UNSTABLE: they spread wider and at one speed too, or nothing (no engine log) tells the
  machine from the schedule, or fewer than 3 repetitions, or a run failed a check beyond
  precision. Whether each system's schedule repeated (schedule_check) and the machine's
  speed (machine_speed_check) are notes that say why.
- notes: /metrics answered p99 <= 250 ms; telemetry gap <= 1 s; the share of tokens
  that arrived coalesced (several in one chunk), which blurs TTFT and ITL but not
  throughput.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from harness.analysis.engine import EngineMetrics, client_engine_disagreement
from harness.analysis.stats import Estimate

MIN_MAKESPAN_S = 20.0
MAX_LATENESS_P99_S = 0.020
MAX_LOOP_LAG_P99_S = 0.020
MAX_CLIENT_CPU_SHARE = 0.9
MAX_LAG_SHARE_OF_ITL = 0.05
CLIENT_BOUND_CHECKS = ("client CPU share", "client loop lag vs ITL")
MORE_WORKERS = "spread the load over more client processes with `--workers N` (or more client machines)"
MAX_DISAGREEMENT = 0.02
MAX_FRONT_END_STARVED = 0.05
MAX_CELL_HALF_WIDTH = 0.05
# A headline ratio's repetitions may spread at most ±5% around it: the precision a
# reproduction is held to (each ratio within ±5% of the median of three reproductions),
# which a wider spread cannot promise. Pairing a repetition's systems cancels drift
# between repetitions, not the machine's speed moving from one run to the next: in
# default reproductions on a 2-core VM the measured paired ratios spread ±5-20% while
# the same ratios at one machine speed spread at most ±2.1% (docs/validation/verdict.md).
# That is NOISY, not STABLE: the ratio shown did not repeat, and one speed says why.
MAX_HEADLINE_HALF_WIDTH = 0.05
# The one definition of "the schedule differed" (schedule_check), for cells and headline
# alike: a system whose engine step counts spread more than this (half their range over
# their median) ran another schedule in some repetition, and that alone could move a figure
# past the precision it is held to. Static batches' make-up follows arrival order and moves
# static's step count by ±2-3.4% (docs/validation/reproduction.md): within this, the same
# schedule, and a cell spread wider than its limit was moved by the machine's speed.
MAX_SCHEDULE_SPREAD = MAX_HEADLINE_HALF_WIDTH
MACHINE_SPEED_VARIED = "machine speed varied"
SCHEDULE_DIFFERED = "schedule differed"
MIN_REPETITIONS = 3
MAX_METRICS_LATENCY_P99_S = 0.250
MAX_TELEMETRY_GAP_S = 1.0

# unstable: the figure cannot be trusted; noisy: it did not repeat within its limit, for a
# reason that leaves its interval honest (the machine's speed); note: said, verdict unchanged.
Severity = Literal["unstable", "noisy", "note"]
Verdict = Literal["stable", "noisy", "unstable"]
# Run checks that bound only how precise a run's figure is (see the module docstring).
BURST_SEND_SPREAD = "burst send lateness"
PRECISION_CHECKS = ("makespan", "client vs engine", BURST_SEND_SPREAD)
RUN_WARNING = "runs' precision"


@dataclass(frozen=True)
class Check:
    """One health check: its measured value, its limit, and what failing it means."""

    name: str
    value: float
    limit: float
    passed: bool
    severity: Severity
    text: str
    # A few words for a one-line summary (the report's headline); empty: the name serves.
    brief: str = ""


@dataclass(frozen=True)
class Health:
    """The checks of a run or a cell and the verdict they add up to."""

    checks: tuple[Check, ...]

    @property
    def stable(self) -> bool:
        """No check that makes it UNSTABLE failed (a NOISY one may have)."""
        return all(check.passed for check in self.checks if check.severity == "unstable")

    @property
    def verdict(self) -> Verdict:
        """unstable, else noisy, else stable: the worst severity among the failed checks."""
        failed = {check.severity for check in self.checks if not check.passed}
        return "unstable" if "unstable" in failed else "noisy" if "noisy" in failed else "stable"

    @property
    def noisy(self) -> list[str]:
        """Why it did not repeat within its limit though its interval holds (empty unless NOISY)."""
        return [check.text for check in self.checks if check.severity == "noisy" and not check.passed]

    @property
    def beyond_precision(self) -> bool:
        """Whether a failed UNSTABLE check is one that does more than bound the figure's precision."""
        return any(not check.passed and check.severity == "unstable" and not _precision_only(check)
                   for check in self.checks)

    @property
    def reasons(self) -> list[str]:
        """Why it is unstable, in words (empty when stable)."""
        return [check.text for check in self.checks if check.severity == "unstable" and not check.passed]

    @property
    def briefs(self) -> list[str]:
        """Why it is unstable or noisy, a few words per failed check (empty when stable)."""
        return [check.brief or check.name for check in self.checks
                if check.severity in ("unstable", "noisy") and not check.passed]

    @property
    def notes(self) -> list[str]:
        return [check.text for check in self.checks if check.severity == "note" and not check.passed]

    @property
    def run_warnings(self) -> list[str]:
        """The notes on runs that failed only checks of precision (see PRECISION_CHECKS)."""
        return [check.text for check in self.checks if check.name == RUN_WARNING and not check.passed]

    @property
    def client_bound(self) -> list[str]:
        """Why the load client, not the server, set the pace (empty when it did not)."""
        return [check.text for check in self.checks if check.name in CLIENT_BOUND_CHECKS and not check.passed]


def _at_most(name: str, value: float, limit: float, severity: Severity, text: str) -> Check | None:
    """A check that `value` <= `limit`; None when the value is NaN (not measured)."""
    if not math.isfinite(value):
        return None
    return Check(name, float(value), limit, value <= limit, severity, text)


def _at_least(name: str, value: float, limit: float, severity: Severity, text: str) -> Check | None:
    """A check that `value` >= `limit`; None when the value is NaN (not measured)."""
    if not math.isfinite(value):
        return None
    return Check(name, float(value), limit, value >= limit, severity, text)


def run_health(
    *,
    makespan_s: float,
    lateness_p99_s: float,
    burst: bool,
    front_end_starved: float,
    loop_lag_p99_s: float | None,
    client_cpu_share: float | None,
    client_generated_tokens: int,
    client_generated_tok_s: float,
    engine: EngineMetrics | None,
    metrics_latency_p99_s: float,
    telemetry_max_gap_s: float,
    coalesced_share: float,
    loop_lag_p50_s: float | None = None,
    median_itl_s: float = math.nan,
    open_loop: bool = False,
) -> Health:
    """The health of one run from what its client, its engine and its telemetry measured.

    `median_itl_s`: the median request's TPOT; `open_loop`: Poisson arrivals (see the module docstring).
    """
    ms = 1000.0
    # Where the engine's step log exists it is the judge of the client's timing (agreement
    # below); the client's own loop lag is then a diagnostic, e.g. during a 1,000-request burst.
    has_engine = engine is not None and engine.steps > 0
    lag_severity: Severity = "note" if has_engine else "unstable"
    late_severity: Severity = "note" if has_engine and burst else "unstable"
    late = (_at_most("send lateness p99", lateness_p99_s, MAX_LATENESS_P99_S, late_severity,
                     f"client sent late: p99 {lateness_p99_s * 1000:.0f} ms behind plan")
            if has_engine or not burst or not makespan_s > 0 else
            _at_most(BURST_SEND_SPREAD, lateness_p99_s / makespan_s, MAX_DISAGREEMENT, "unstable",
                     f"client sent the burst late: p99 {lateness_p99_s * 1000:.0f} ms behind plan,"
                     f" {lateness_p99_s / makespan_s:.1%} of the run"))
    checks = [
        _at_least("makespan", makespan_s, MIN_MAKESPAN_S, "unstable",
                  f"run lasted {makespan_s:.1f} s, under the {MIN_MAKESPAN_S:.0f} s a figure needs here"),
        late,
        _at_most("client loop lag p99", _or_nan(loop_lag_p99_s), MAX_LOOP_LAG_P99_S, lag_severity,
                 f"client event loop lagged: p99 {_or_nan(loop_lag_p99_s) * ms:.0f} ms"),
        _at_most("client CPU share", _or_nan(client_cpu_share), MAX_CLIENT_CPU_SHARE, "unstable",
                 f"client-bound: the load client used {_or_nan(client_cpu_share):.0%} of a core (limit"
                 f" {MAX_CLIENT_CPU_SHARE:.0%}), so its figures measure the client, not the server; {MORE_WORKERS}"),
        _lag_against_itl(_or_nan(loop_lag_p50_s), median_itl_s, lag_severity),
        _at_most("/metrics latency p99", metrics_latency_p99_s, MAX_METRICS_LATENCY_P99_S, "note",
                 f"/metrics answered slowly: p99 {metrics_latency_p99_s * ms:.0f} ms"),
        _at_most("telemetry gap", telemetry_max_gap_s, MAX_TELEMETRY_GAP_S, "note",
                 f"telemetry had a gap of {telemetry_max_gap_s:.1f} s"),
        _at_most("coalesced tokens", coalesced_share, 0.5, "note",
                 f"{coalesced_share:.0%} of tokens arrived coalesced: TTFT and ITL are coarse"),
    ]
    if engine is not None and has_engine:
        disagreement = client_engine_disagreement(client_generated_tok_s, engine)
        checks.append(_at_most("front-end starvation", front_end_starved, MAX_FRONT_END_STARVED, "unstable",
                               f"engine had a free slot while sent requests had not reached it for"
                               f" {front_end_starved:.1%} of the run: the front end set the pace"))
        checks.append(_at_most("client vs engine", abs(disagreement), MAX_DISAGREEMENT,
                               "note" if open_loop else "unstable",
                               f"client and engine throughput differ by {disagreement:+.1%}"))
        counted = Check("token count", float(client_generated_tokens - engine.generated_tokens), 0.0,
                        client_generated_tokens == engine.generated_tokens, "unstable",
                        f"client received {client_generated_tokens} tokens, engine generated {engine.generated_tokens}")
        checks.append(counted)
    return Health(tuple(check for check in checks if check is not None))


def _lag_against_itl(lag_s: float, itl_s: float, severity: Severity) -> Check | None:
    """The client's median loop lag as a share of the median inter-token time (None if unknown)."""
    if not itl_s > 0:
        return None
    share = lag_s / itl_s
    size = f"{share:.0%} of" if share < 10 else f"{share:,.0f}x"
    return _at_most("client loop lag vs ITL", share, MAX_LAG_SHARE_OF_ITL, severity,
                    f"client-bound: the load client's event loop lagged {lag_s * 1000:.2f} ms (median), {size}"
                    f" the median inter-token time of {itl_s * 1000:.2f} ms (limit {MAX_LAG_SHARE_OF_ITL:.0%}), so"
                    f" token times are the client's, not the server's; {MORE_WORKERS}")


def cell_health(estimate: Estimate, runs: Sequence[Health], engines: Sequence[EngineMetrics | None] = ()) -> Health:
    """A cell is stable when it has enough repetitions, a narrow interval, and sound runs.

    `engines` (the runs' engine-side figures, where known) say why repetitions spread: a
    different schedule (schedule_check's rule), or the same schedule at another speed. A
    spread cell gets a warning (a note) that says which: its absolute figure is not what
    the report claims. A run failing a check beyond precision makes it UNSTABLE.
    """
    checks: list[Check | None] = [
        Check("repetitions", float(estimate.n), MIN_REPETITIONS, estimate.n >= MIN_REPETITIONS, "unstable",
              f"{estimate.n} repetition(s), fewer than {MIN_REPETITIONS}: no interval",
              f"{estimate.n} repetition(s), {MIN_REPETITIONS} needed"),
    ]
    speed = machine_speed_check(engines)
    if estimate.n >= 2:
        half = estimate.repeat_spread
        narrow = half <= MAX_CELL_HALF_WIDTH
        # A spread cell's reason says what moved it, when the engine steps can tell.
        why = f" ({speed.text})" if speed is not None and not narrow else ""
        short = f" ({speed.brief})" if speed is not None and not narrow else ""
        checks.append(Check("interval", half, MAX_CELL_HALF_WIDTH, narrow, "note",
                            f"repetitions spread ±{half:.1%} around the median{why}",
                            f"spread ±{half:.1%}{short}"))
        if why:
            speed = None
    checks.extend(_runs_checks(runs))
    checks.append(speed)
    return Health(tuple(check for check in checks if check is not None))


def _precision_only(check: Check) -> bool:
    """A failed run check that bounds only the precision of the run's figure (PRECISION_CHECKS)."""
    if check.name in ("client vs engine", BURST_SEND_SPREAD):
        return check.value <= MAX_HEADLINE_HALF_WIDTH
    return check.name in PRECISION_CHECKS


def _runs_checks(runs: Sequence[Health]) -> list[Check]:
    """Failed checks for the runs of a cell or a row: UNSTABLE for runs that fail beyond precision,
    a warning (a note) for runs that fail only on precision, each naming the first one's first reason."""
    unsound = [run for run in runs if run.beyond_precision]
    imprecise = [run for run in runs if not run.stable and not run.beyond_precision]
    checks = []
    if unsound:
        checks.append(Check("runs", float(len(unsound)), 0.0, False, "unstable",
                            f"{len(unsound)} of {len(runs)} runs unstable ({unsound[0].reasons[0]})",
                            f"{len(unsound)} of {len(runs)} runs unstable"))
    if imprecise:
        checks.append(Check(RUN_WARNING, float(len(imprecise)), 0.0, False, "note",
                            f"{len(imprecise)} of {len(runs)} runs with a warning ({imprecise[0].reasons[0]}): the"
                            " ratio's repetitions show whether it moved the figure"))
    return checks


@dataclass(frozen=True)
class HeadlineMember:
    """One system of a headline row: its runs' verdicts and engine-side figures."""

    system: str
    runs: tuple[Health, ...]
    engines: tuple[EngineMetrics | None, ...] = ()


def headline_health(ratios: Mapping[str, Estimate], members: Sequence[HeadlineMember],
                    at_one_speed: Mapping[str, Estimate] | None = None) -> Health:
    """The verdict on what a headline row claims: its ratios between systems, as shown.

    STABLE when every ratio's repetitions lie within MAX_HEADLINE_HALF_WIDTH of it;
    NOISY when one spreads wider but its counterpart in `at_one_speed` (every run re-priced
    at one machine speed) does not; UNSTABLE when it spreads at one speed too or there is
    none, when a ratio has fewer than MIN_REPETITIONS repetitions, or when a run of a
    member system fails a check beyond precision. Each member's schedule and the machine's
    speed are notes that say why a ratio moved.
    """
    checks: list[Check] = []
    for name, ratio in ratios.items():
        checks.append(Check("repetitions", float(ratio.n), MIN_REPETITIONS, ratio.n >= MIN_REPETITIONS, "unstable",
                            f"{name}: {ratio.n} repetition(s), fewer than {MIN_REPETITIONS}: no interval",
                            f"{name} {ratio.n} repetition(s), {MIN_REPETITIONS} needed"))
        checks.extend(_ratio_repeats(name, ratio, (at_one_speed or {}).get(name)))
    for member in members:
        schedule = schedule_check(member.engines)
        speed = machine_speed_check(member.engines) if schedule is None or schedule.passed else None
        for check in (*_runs_checks(member.runs), schedule and replace(schedule, severity="note"), speed):
            if check is not None:
                checks.append(replace(check, text=f"{member.system}: {check.text}",
                                      brief=f"{member.system} {check.brief or check.name}"))
    return Health(tuple(checks))


def _ratio_repeats(name: str, ratio: Estimate, at_one_speed: Estimate | None) -> list[Check]:
    """Whether a ratio's repetitions lie within MAX_HEADLINE_HALF_WIDTH of it, and if not, why (NOISY or UNSTABLE)."""
    half = ratio.repeat_spread
    if ratio.n < 2 or not math.isfinite(half):
        return []
    kind = "" if "paired" in ratio.method else " (unpaired)"
    text = f"{name}: repetitions spread ±{half:.1%}{kind} around the ratio (limit ±{MAX_HEADLINE_HALF_WIDTH:.0%})"
    if half <= MAX_HEADLINE_HALF_WIDTH:
        return [Check("ratio repeats", half, MAX_HEADLINE_HALF_WIDTH, True, "unstable", text)]
    held = at_one_speed.repeat_spread if at_one_speed is not None and at_one_speed.n >= 2 else math.nan
    if held <= MAX_HEADLINE_HALF_WIDTH:
        assert at_one_speed is not None
        return [Check("ratio repeats", half, MAX_HEADLINE_HALF_WIDTH, False, "noisy",
                      f"{text}; at one machine speed {at_one_speed.point:.2f}× within ±{held:.1%}: the schedules"
                      " repeated and the machine's speed moved",
                      f"{name} ±{half:.1%}, at one speed ±{held:.1%}: machine speed")]
    why = (f"; at one machine speed too (±{held:.1%}): the schedules differed" if math.isfinite(held)
           else "; no engine log tells the machine's speed from the schedule")
    return [Check("ratio repeats", half, MAX_HEADLINE_HALF_WIDTH, False, "unstable", text + why,
                  f"{name} ±{half:.1%}" + (f", at one speed ±{held:.1%}" if math.isfinite(held) else ""))]


def _step_counts(engines: Sequence[EngineMetrics | None]) -> np.ndarray:
    """The engine step count of every repetition that has a step log."""
    return np.array([engine.steps for engine in engines if engine is not None and engine.steps > 0], dtype=float)


def _half_range(values: np.ndarray) -> float:
    """Half the range of `values` over their median."""
    return float((values.max() - values.min()) / 2 / np.median(values))


def schedule_check(engines: Sequence[EngineMetrics | None]) -> Check | None:
    """Did every repetition run the same schedule? UNSTABLE past MAX_SCHEDULE_SPREAD; None if unknown.

    MAX_SCHEDULE_SPREAD on the step counts' half range is the one rule for "the schedule
    differed": machine_speed_check applies it to the cells too.
    """
    steps = _step_counts(engines)
    if len(steps) < 2:
        return None
    spread = _half_range(steps)
    return Check("schedule", spread, MAX_SCHEDULE_SPREAD, spread <= MAX_SCHEDULE_SPREAD, "unstable",
                 f"the schedule differed between repetitions: {steps.min():.0f}-{steps.max():.0f} engine steps"
                 f" (±{spread:.1%}, limit ±{MAX_SCHEDULE_SPREAD:.0%})", SCHEDULE_DIFFERED)


def machine_speed_check(engines: Sequence[EngineMetrics | None]) -> Check | None:
    """Did repetitions run the same schedule at the same speed? (a note; None if unknown).

    The scheduler's decisions show in the number of engine steps; the machine's speed
    in the median step time. The same schedule (step counts within MAX_SCHEDULE_SPREAD, as
    schedule_check judges it) at step times that spread by more than the cell limit means
    the machine, not the scheduler, moved the figure.
    """
    known = [engine for engine in engines if engine is not None and engine.steps > 0]
    if len(known) < 2:
        return None
    steps = _step_counts(known)
    step_ms = np.array([engine.median_step_s for engine in known]) * 1000.0
    spread = _half_range(step_ms)
    if _half_range(steps) > MAX_SCHEDULE_SPREAD:
        brief = SCHEDULE_DIFFERED
        text = (f"the schedule differed between repetitions: {steps.min():.0f}-{steps.max():.0f} engine steps,"
                f" median step {step_ms.min():.1f}-{step_ms.max():.1f} ms")
    elif spread > MAX_CELL_HALF_WIDTH:
        brief = MACHINE_SPEED_VARIED
        text = (f"same schedule ({steps.min():.0f}-{steps.max():.0f} engine steps) at median step times of"
                f" {step_ms.min():.1f}-{step_ms.max():.1f} ms (±{spread:.0%}): the machine's speed varied,"
                " not the scheduler")
    else:
        brief = "neither schedule nor step time moved"
        text = (f"same schedule ({steps.min():.0f}-{steps.max():.0f} engine steps) at median step times of"
                f" {step_ms.min():.1f}-{step_ms.max():.1f} ms (±{spread:.0%}): neither the schedule nor the median"
                " step time explains the spread")
    return Check("machine speed", spread, MAX_CELL_HALF_WIDTH, spread <= MAX_CELL_HALF_WIDTH, "note", text, brief)


def coalesced_share(tokens: pd.DataFrame) -> float:
    """Share of tokens that arrived in the same chunk as the token before them."""
    if tokens.empty:
        return math.nan
    ordered = tokens.sort_values(["request_id", "token_index"])
    same_request = ordered["request_id"].to_numpy()[1:] == ordered["request_id"].to_numpy()[:-1]
    same_time = np.diff(ordered["t_s"].to_numpy()) == 0
    return float(np.sum(same_request & same_time) / len(ordered))


def telemetry_stats(telemetry: pd.DataFrame) -> tuple[float, float]:
    """(p99 /metrics latency, longest gap between polls) in seconds; NaN when unknown."""
    if len(telemetry) < 2:
        return math.nan, math.nan
    latency = telemetry["latency_s"].dropna()
    p99 = float(np.percentile(latency, 99)) if len(latency) else math.nan
    return p99, float(np.diff(np.sort(telemetry["t"].to_numpy())).max())


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)
