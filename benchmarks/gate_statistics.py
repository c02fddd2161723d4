"""The regression gate's false-alarm and detection rates, on simulated repetitions (issue #9).

1,000 simulated comparisons per scenario, 5 repetitions a side, 3% multiplicative lognormal
noise (harness.gate.power), fixed seeds:
- no change: regressions called must be <= 1% (false alarms); inconclusive reported;
- a true 10% drop: regressions called must be >= 95% (detection);
- a true 3% drop, under the 5% threshold: how often it is called anyway.
Each scenario is judged by the default rule; by it with the nightly's 2 extra candidate
repetitions for an inconclusive comparison; and, for comparison, by the rule without its
margin test (as it was before the margin).

Then the same scenarios with the noise of this machine's real repetitions instead of a
lognormal: residuals from benchmarks/results/gate_acceptance_independent.json and its
_8trials twin (every set of 5-10 repetitions of one server there, around its own mean),
resampled, at 5, 8 and 10 repetitions a side with 2 extra repetitions. It says what detection the
real-server acceptance should expect, and how many repetitions this machine's noise needs.

Last, the margin: a true 3% drop sits on the default 3% margin's boundary, so it is
called about margin_alpha x P(its ratio measures beyond the line) of the time. Each
margin in MARGINS is judged on the issue's lognormal design (5 repetitions a side) and on the
measured noise at 8 repetitions a side + 2 extra: what a wider margin buys on the 3% drop and
costs on the 10% one.

    .venv/bin/python benchmarks/gate_statistics.py

Writes benchmarks/results/gate_statistics.json; exits 1 if an acceptance figure fails.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from harness.gate.power import OutcomeRates, log_residuals, resample_outcomes, simulate_outcomes
from harness.gate.rule import GateRule

ROOT = Path(__file__).resolve().parent.parent
COMPARISONS, REPETITIONS, NOISE = 1000, 5, 0.03
# (name, true drop, seed): one seed per scenario so each is reproducible alone.
SCENARIOS = (("no change", 0.0, 1), ("3% drop", 0.03, 2), ("10% drop", 0.10, 3))
MAX_FALSE_ALARM, MIN_DETECTION = 0.01, 0.95
MEASURED_RESULTS = tuple(ROOT / "benchmarks" / "results" / f"gate_acceptance_independent{suffix}.json"
                         for suffix in ("", "_8trials"))
MEASURED_DESIGNS = ((5, 2), (8, 2), (10, 2))  # (repetitions a side, extra candidate repetitions)
MARGINS = (0.03, 0.04, 0.045)
MARGIN_DESIGN = (8, 2)  # the measured-noise design the margins are compared on


def measured_sets(paths: tuple[Path, ...]) -> list[list[float]]:
    """Every set of repetitions of one server in gate_acceptance --independent results.

    Per gate run: its baseline repetitions (once: the scenarios of a gate run share them) and
    each scenario's candidate repetitions, extra repetitions included.
    """
    sets: list[list[float]] = []
    for path in paths:
        runs = [run for scenario_runs in json.loads(path.read_text())["outcomes"].values() for run in scenario_runs]
        baselines = {tuple(run["baseline_engine_tok_s"]) for run in runs}
        sets += [run["candidate_engine_tok_s"] for run in runs] + [list(base) for base in sorted(baselines)]
    return sets


def figures(rates: OutcomeRates) -> dict[str, float | int]:
    """The scenario's counts and rates, for the JSON file."""
    return {**asdict(rates), "regression_rate": rates.regression_rate, "inconclusive_rate": rates.inconclusive_rate}


def main() -> int:
    began = time.perf_counter()
    # label: (rule, extra candidate repetitions for an inconclusive comparison)
    rules = {"default": (GateRule(), 0), "default + 2 extra repetitions": (GateRule(), 2),
             "no margin": (GateRule(margin=0.0), 0)}
    results: dict[str, dict[str, dict[str, float | int]]] = {}
    for label, (rule, extra) in rules.items():
        print(f"{label}: threshold {rule.threshold:.0%}, alpha {rule.alpha:g}, margin {rule.margin:.0%} at "
              f"{rule.margin_alpha:g}, {COMPARISONS} comparisons of {REPETITIONS} repetitions a side,"
              f" {NOISE:.0%} noise")
        results[label] = {}
        for name, drop, seed in SCENARIOS:
            rates = simulate_outcomes(drop, NOISE, REPETITIONS, COMPARISONS, seed, rule, extra)
            results[label][name] = figures(rates)
            print(f"  {name:>9}: regression {rates.regression_rate:6.1%}  inconclusive {rates.inconclusive_rate:6.1%}"
                  f"  pass {rates.passed / rates.comparisons:6.1%}")
    residuals = log_residuals(measured_sets(MEASURED_RESULTS))
    measured_noise = float(residuals.std(ddof=1))
    sources = ", ".join(path.name for path in MEASURED_RESULTS)
    print(f"measured noise: {residuals.size} residuals from {sources}, standard deviation {measured_noise:.1%},"
          " default rule")
    measured: dict[str, dict[str, dict[str, float | int]]] = {}
    for repetitions, extra in MEASURED_DESIGNS:
        label = f"{repetitions} repetitions a side + {extra} extra"
        measured[label] = {}
        for name, drop, seed in SCENARIOS:
            rates = resample_outcomes(drop, residuals, repetitions, COMPARISONS, seed, GateRule(), extra)
            measured[label][name] = figures(rates)
            print(f"  {label}, {name:>9}: regression {rates.regression_rate:6.1%}  "
                  f"inconclusive {rates.inconclusive_rate:6.1%}")
    margin_repetitions, margin_extra = MARGIN_DESIGN
    print(f"margins: lognormal {NOISE:.0%} at {REPETITIONS} repetitions a side; measured noise at"
          f" {margin_repetitions} a side + {margin_extra} extra")
    margins: dict[str, dict[str, dict[str, float | int]]] = {}
    for margin in MARGINS:
        rule = GateRule(margin=margin)
        lognormal = f"margin {margin:.1%}, lognormal, {REPETITIONS} repetitions"
        resampled = f"margin {margin:.1%}, measured, {margin_repetitions} repetitions + {margin_extra}"
        margins[lognormal] = {name: figures(simulate_outcomes(drop, NOISE, REPETITIONS, COMPARISONS, seed, rule))
                              for name, drop, seed in SCENARIOS}
        margins[resampled] = {name: figures(resample_outcomes(drop, residuals, margin_repetitions, COMPARISONS, seed,
                                                              rule, margin_extra))
                              for name, drop, seed in SCENARIOS}
        for label in (lognormal, resampled):
            print(f"  {label:>36}: " + "  ".join(f"{name} {margins[label][name]['regression_rate']:6.1%}"
                                                 for name, _, _ in SCENARIOS))
    default = results["default"]
    acceptance = {
        "false_alarm_rate": default["no change"]["regression_rate"],
        "false_alarm_ok": default["no change"]["regression_rate"] <= MAX_FALSE_ALARM,
        "detection_rate": default["10% drop"]["regression_rate"],
        "detection_ok": default["10% drop"]["regression_rate"] >= MIN_DETECTION,
    }
    print(f"false alarms {acceptance['false_alarm_rate']:.1%} (<= {MAX_FALSE_ALARM:.0%}), "
          f"detection {acceptance['detection_rate']:.1%} (>= {MIN_DETECTION:.0%}), "
          f"{time.perf_counter() - began:.1f} s")
    out = ROOT / "benchmarks" / "results" / "gate_statistics.json"
    out.write_text(json.dumps({"rules": {label: {**asdict(rule), "extra_repetitions": extra}
                                         for label, (rule, extra) in rules.items()},
                               "results": results, "measured_noise": {"source": [p.name for p in MEASURED_RESULTS],
                                                                      "residuals": residuals.size,
                                                                      "std": measured_noise,
                                                                      "results": measured},
                               "margins": margins,
                               "acceptance": acceptance}, indent=2) + "\n")
    return 0 if acceptance["false_alarm_ok"] and acceptance["detection_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
