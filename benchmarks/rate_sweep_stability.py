"""Do back-to-back rate sweeps agree? Their knees, held rates and the held ratio side by side.

Takes the report directories of several `batchbench sweep-rates` runs (their summary.json)
and prints, per sweep: each system's saturation, knee and rate held under the SLO, the
ratio continuous/static of the held rates, static's median queue wait over continuous's
where static's queue grew, and the worst measured-vs-predicted p50 E2E below the knees (held
out, and at each run's own step speed).
Then, for each knee and for the held ratio, the largest deviation from the median of the
sweeps. The issue-25 targets: knees within ±10%, the held ratio within ±10% of the median
of three, queue-wait ratios at least 5x, predictions within 15% below the knee.

    .venv/bin/python benchmarks/rate_sweep_stability.py DIR DIR DIR [--out FILE]

Writes benchmarks/results/rate_sweep_stability.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.10


def sweep_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures compared across sweeps, from one summary.json."""
    systems = summary["systems"]
    continuous = {p["offered_rate"]: p["queue_wait_p50_s"] for p in systems["continuous"]["points"]}
    queue_ratios = [p["queue_wait_p50_s"] / continuous[p["offered_rate"]] for p in systems["static"]["points"]
                    if not p["keeps_up"] and continuous.get(p["offered_rate"])]
    return {
        **{f"{name} {figure}": systems[name][key] for name in ("continuous", "static")
           for figure, key in (("saturation", "saturation_rps"), ("knee", "knee_rps"), ("held", "held_rps"))},
        "held bound continuous": systems["continuous"]["held_bound"],
        "held ratio continuous/static": summary["held_ratio"]["continuous/static"],
        "knee ratio continuous/static": summary["knee_ratio"]["continuous/static"],
        "queue wait static/continuous where static's queue grew (min)": min(queue_ratios, default=None),
        "worst prediction error below knee": summary["worst_prediction_error_below_knee"],
        "worst prediction error below knee at the run's speed": summary.get(
            "worst_prediction_error_below_knee_at_run_speed"),
        "decode step ms at B": summary["decode_step_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rate_sweep_stability.json")
    args = parser.parse_args()
    sweeps = {str(path): sweep_figures(json.loads((path / "summary.json").read_text())) for path in args.reports}
    spread = {}
    for figure in ("continuous knee", "static knee", "continuous held", "static held", "held ratio continuous/static"):
        values = [sweep[figure] for sweep in sweeps.values()]
        if all(isinstance(value, float) for value in values):
            middle = statistics.median(values)
            spread[figure] = {"median": middle, "largest deviation": max(abs(v / middle - 1) for v in values),
                              "within target": max(abs(v / middle - 1) for v in values) <= TARGET}
    for name, figures in sweeps.items():
        print(name)
        for figure, value in figures.items():
            print(f"  {figure}: {value:.3g}" if isinstance(value, float) else f"  {figure}: {value}")
    for figure, result in spread.items():
        print(f"{figure}: median {result['median']:.3g}, largest deviation {result['largest deviation']:.1%}"
              f" ({'within' if result['within target'] else 'OUTSIDE'} ±{TARGET:.0%})")
    args.out.write_text(json.dumps({"sweeps": sweeps, "spread": spread, "target": TARGET}, indent=2) + "\n")


if __name__ == "__main__":
    main()
