"""The gate over many configurations: group repetitions by configuration, judge each, add up.

A candidate (a run, a reproduce or a nightly result) holds repetitions of one or more
configurations (RepetitionRow.config_key). Each is judged against its baseline sample by
`harness.gate.statistics.decide`; the gate's outcome is the worst of them: any
regression, else any inconclusive, else pass. Pure: the repetitions come in as rows.
A configuration whose baseline is an earlier server build's (an upgrade) is judged the same
way, and its verdict carries the upgrade's label for the outputs.

Repetitions with an UNSTABLE health verdict are set aside, on either side, and named in the
reasons: they are not measurements. The gate judges the rest, so a configuration left
with too few is inconclusive, and more repetitions (`nightly` adds them) can settle it; one
disturbed repetition does not block a night. Failed requests are a fault of the server, not
noise: any makes the configuration inconclusive, with the count in the reasons.

The figure compared is throughput, tok/s, higher is better. By default the engine's
own (engine_total_tok_s: measured at the source, without the client's network and
streaming) when every repetition on both sides has it, else Anyscale's total tok/s over the
client's makespan; the output says which. Open-loop repetitions (Poisson arrivals) are the
exception: their throughput is the offered rate whatever the server does, so by default
they are judged on their median end-to-end latency, at one machine speed
(e2e_p50_at_one_speed_s: the run-to-run swing of a shared VM's speed within one
invocation taken out; harness.history.from_run) when every repetition has an engine log, else as measured
(e2e_p50_s). A latency is judged as its reciprocal, so that the statistics and the ratio
read the same way: below 1 is worse (the ratio is baseline latency over candidate latency).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.analysis.stats import Estimate, median_ci
from harness.gate.rule import LOWER_IS_BETTER, GateRule, MetricChoice
from harness.gate.statistics import Outcome, Verdict, between_night_noise, decide
from harness.history.rows import RepetitionRow
from harness.systems import OPEN_LOOP_ARRIVALS

EXIT_CODES: dict[Outcome, int] = {"pass": 0, "regression": 1, "inconclusive": 3}


@dataclass(frozen=True)
class BaselineSample:
    """A configuration's baseline: its repetitions night by night (one night for a pinned result)."""

    nights: tuple[tuple[RepetitionRow, ...], ...]
    # Where it came from, for the output: "pinned <dir>" or "last 7 accepted nights".
    description: str
    # "<previous build> -> <candidate's build>" when the nights are the server build's before the
    # candidate's (harness.gate.baselines.from_history): the candidate is an upgrade, judged like any night.
    upgrade: str | None = None

    @property
    def repetitions(self) -> tuple[RepetitionRow, ...]:
        return tuple(row for night in self.nights for row in night)


@dataclass(frozen=True)
class ConfigVerdict:
    """One configuration's verdict, with the figures behind it."""

    config_key: str
    label: str
    metric: str
    candidate: Estimate
    baseline: Estimate | None
    verdict: Verdict | None
    outcome: Outcome
    reasons: tuple[str, ...]
    baseline_description: str
    # The baseline's upgrade label (BaselineSample.upgrade), for the outputs to show; None: not an upgrade.
    upgrade: str | None


@dataclass(frozen=True)
class GateResult:
    """Every configuration's verdict and the gate's outcome (the worst of them)."""

    configs: tuple[ConfigVerdict, ...]
    rule: GateRule
    notes: tuple[str, ...] = field(default=())

    @property
    def outcome(self) -> Outcome:
        outcomes = {config.outcome for config in self.configs}
        if "regression" in outcomes:
            return "regression"
        return "inconclusive" if "inconclusive" in outcomes or not self.configs else "pass"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression, 3 inconclusive (2 is bad input, raised before a result exists)."""
        return EXIT_CODES[self.outcome]


def group_by_config(rows: Sequence[RepetitionRow]) -> dict[str, list[RepetitionRow]]:
    """Repetitions grouped by configuration, in first-seen order."""
    groups: dict[str, list[RepetitionRow]] = {}
    for row in rows:
        groups.setdefault(row.config_key, []).append(row)
    return groups


def label(row: RepetitionRow) -> str:
    """A configuration as people name it: workload, system, B and model."""
    return f"{row.workload} {row.system} B={row.batch_size} {row.model}"


def choose_metric(requested: MetricChoice, rows: Sequence[RepetitionRow]) -> str:
    """The figure to compare; with `auto`: p50 E2E when `rows[0]` (a candidate) arrived open loop (at one
    speed when every row has it), else the engine's total tok/s when every row has one, else the client's."""
    if requested != "auto":
        return requested
    if rows and rows[0].arrival in OPEN_LOOP_ARRIVALS:
        at_one_speed = all(measured_value(row, "e2e_p50_at_one_speed_s") for row in rows)
        return "e2e_p50_at_one_speed_s" if at_one_speed else "e2e_p50_s"
    engine = bool(rows) and all(measured_value(row, "engine_total_tok_s") for row in rows)
    return "engine_total_tok_s" if engine else "total_tok_s"


def judge_config(
    candidate: Sequence[RepetitionRow],
    baseline: BaselineSample | None,
    rule: GateRule,
    metric: MetricChoice = "auto",
    first_night_passes: bool = False,
) -> ConfigVerdict:
    """One configuration's verdict: its candidate repetitions against its baseline sample.

    No baseline: inconclusive, or, with `first_night_passes` (a nightly's first night of a
    configuration on its machine under any server build: an upgrade's baseline is the previous
    build's nights), a pass that starts the baseline. An upgrade is judged like any other night
    and carries its label into the verdict.
    """
    head = candidate[0]
    chosen = choose_metric(metric, [*candidate, *(baseline.repetitions if baseline else ())])
    usable, set_aside = _usable(candidate, "candidate")
    values = _values(usable, chosen)
    estimate = median_ci(values) if values else Estimate(math.nan, math.nan, math.nan, 0, "no repetition measured")
    base_description = baseline.description if baseline else "none"

    def result(outcome: Outcome, reasons: Sequence[str], base: Estimate | None = None,
               verdict: Verdict | None = None) -> ConfigVerdict:
        return ConfigVerdict(head.config_key, label(head), chosen, estimate, base, verdict, outcome,
                             tuple(reasons), base_description, baseline.upgrade if baseline else None)

    if baseline is None or not baseline.repetitions:
        failed = _failed(candidate, "candidate")
        if first_night_passes and len(values) >= rule.min_repetitions and not failed:
            return result("pass", ["first night of this configuration on this machine, under any server build: it"
                                   " starts the baseline", *set_aside])
        short = failed if first_night_passes else ["no baseline repetitions of this configuration"]
        if len(values) < rule.min_repetitions:
            short.append(f"{len(values)} usable candidate repetitions, fewer than {rule.min_repetitions}")
        return result("inconclusive", [*short, *set_aside])
    nights = [_values(_usable(night, "baseline")[0], chosen) for night in baseline.nights]
    base_values = [value for night in nights for value in night]
    base_aside = _usable(baseline.repetitions, "baseline")[1]
    if not values or not base_values:
        side = "candidate" if not values else "baseline"
        return result("inconclusive", [f"no usable {side} repetition measured {chosen}", *set_aside, *base_aside])
    verdict = decide(_judged(base_values, chosen), _judged(values, chosen), rule,
                     between_night_noise([night for night in nights if night]),
                     problems=_failed(candidate, "candidate") + _failed(baseline.repetitions, "baseline"))
    return result(verdict.outcome, [*verdict.reasons, *set_aside, *base_aside], median_ci(base_values), verdict)


def gate(
    candidate: Sequence[RepetitionRow],
    baselines: Mapping[str, BaselineSample],
    rule: GateRule,
    metric: MetricChoice = "auto",
    first_night_passes: bool = False,
) -> GateResult:
    """Judge every configuration of `candidate` against `baselines` (by config_key).

    A configuration judged on the client's figure although the engine's was asked for
    (`auto`) gets a note saying so: some repetition of it has no engine step log.
    """
    configs = tuple(
        judge_config(rows, baselines.get(key), rule, metric, first_night_passes)
        for key, rows in group_by_config(candidate).items()
    )
    client_only = [config.label for config in configs if metric == "auto" and config.metric == "total_tok_s"]
    notes = (f"judged on the client's total tok/s, not the engine's: no engine step log in some repetition of"
             f" {', '.join(client_only)} (a server not launched here, or one that records none, such as"
             " transformers serve)",) if client_only else ()
    return GateResult(configs, rule, notes)


def measured_value(row: RepetitionRow, metric: str) -> float | None:
    """`row`'s figure of `metric` where it was measured (finite and > 0), else None."""
    value = getattr(row, metric)
    return float(value) if value is not None and math.isfinite(value) and value > 0 else None


def _values(rows: Sequence[RepetitionRow], metric: str) -> list[float]:
    return [value for value in (measured_value(row, metric) for row in rows) if value is not None]


def _judged(values: Sequence[float], metric: str) -> list[float]:
    """What the statistics compare: the figure, or its reciprocal where lower is better."""
    return [1.0 / value for value in values] if metric in LOWER_IS_BETTER else list(values)


def _usable(rows: Sequence[RepetitionRow], side: str) -> tuple[list[RepetitionRow], list[str]]:
    """The STABLE repetitions, and why the others were set aside."""
    unstable = [row for row in rows if not row.stable]
    if not unstable:
        return list(rows), []
    why = f" ({unstable[0].health_reasons[0]})" if unstable[0].health_reasons else ""
    return [row for row in rows if row.stable], [f"{len(unstable)} {side} repetitions set aside: UNSTABLE{why}"]


def _failed(rows: Sequence[RepetitionRow], side: str) -> list[str]:
    """A reason when any of `rows` had failed requests."""
    failed = [row for row in rows if row.errors]
    if not failed:
        return []
    return [f"{len(failed)} {side} repetitions had {sum(row.errors for row in failed)} failed requests"]
