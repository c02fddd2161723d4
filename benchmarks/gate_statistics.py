"""The regression gate's false-alarm and detection rates, on simulated trials (issue #9).

1,000 simulated comparisons per scenario, 5 trials a side, 3% multiplicative lognormal
noise (harness.gate.power), fixed seeds:
- no change: regressions called must be <= 1% (false alarms); inconclusive reported;
- a true 10% drop: regressions called must be >= 95% (detection);
- a true 3% drop, under the 5% threshold: how often it is called anyway.
Each scenario is judged by the default rule; by it with the nightly's 2 extra candidate
trials for an inconclusive comparison; and, for comparison, by the rule without its
margin test (as it was before the margin).

    .venv/bin/python benchmarks/gate_statistics.py

Writes benchmarks/results/gate_statistics.json; exits 1 if an acceptance figure fails.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from harness.gate.power import OutcomeRates, simulate_outcomes
from harness.gate.statistics import GateRule

ROOT = Path(__file__).resolve().parent.parent
COMPARISONS, TRIALS, NOISE = 1000, 5, 0.03
# (name, true drop, seed): one seed per scenario so each is reproducible alone.
SCENARIOS = (("no change", 0.0, 1), ("3% drop", 0.03, 2), ("10% drop", 0.10, 3))
MAX_FALSE_ALARM, MIN_DETECTION = 0.01, 0.95


def figures(rates: OutcomeRates) -> dict[str, float | int]:
    """The scenario's counts and rates, for the JSON file."""
    return {**asdict(rates), "regression_rate": rates.regression_rate, "inconclusive_rate": rates.inconclusive_rate}


def main() -> int:
    began = time.perf_counter()
    # label: (rule, extra candidate trials for an inconclusive comparison)
    rules = {"default": (GateRule(), 0), "default + 2 extra trials": (GateRule(), 2),
             "no margin": (GateRule(margin=0.0), 0)}
    results: dict[str, dict[str, dict[str, float | int]]] = {}
    for label, (rule, extra) in rules.items():
        print(f"{label}: threshold {rule.threshold:.0%}, alpha {rule.alpha:g}, margin {rule.margin:.0%} at "
              f"{rule.margin_alpha:g}, {COMPARISONS} comparisons of {TRIALS} trials a side, {NOISE:.0%} noise")
        results[label] = {}
        for name, drop, seed in SCENARIOS:
            rates = simulate_outcomes(drop, NOISE, TRIALS, COMPARISONS, seed, rule, extra)
            results[label][name] = figures(rates)
            print(f"  {name:>9}: regression {rates.regression_rate:6.1%}  inconclusive {rates.inconclusive_rate:6.1%}"
                  f"  pass {rates.passed / rates.comparisons:6.1%}")
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
    out.write_text(json.dumps({"rules": {label: {**asdict(rule), "extra_trials": extra}
                                         for label, (rule, extra) in rules.items()},
                               "results": results, "acceptance": acceptance}, indent=2) + "\n")
    return 0 if acceptance["false_alarm_ok"] and acceptance["detection_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
