"""Is median E2E at a fixed rate stable enough to gate? Night-to-night figures from a history file.

Takes a results history (the nights of a suite with an open-loop workload, e.g.
cpu-nightly's cpu-anyscale-latency-at-3rps) and prints, per configuration, figure and
night: the median of the repetitions' values, their coefficient of variation (the gate
calls a side whose CV exceeds 10% inconclusive), and each night's median against the
median of all nights. Both figures the gate can judge: p50 E2E as measured, and at one
machine speed (the one `--metric auto` picks where every run has an engine log). The
gate's own verdicts are in each night's --json file.

    .venv/bin/python benchmarks/latency_gate_nights.py HISTORY [--out FILE]

Writes benchmarks/results/latency_gate_nights.json (or --out).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.stats import coefficient_of_variation
from harness.history import HistoryStore

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ("e2e_p50_s", "e2e_p50_at_one_speed_s")


def nights_of(rows: pd.DataFrame, figure: str) -> dict[str, dict[str, Any]]:
    """Per night: repetitions, median, CV and the median against the median of all nights."""
    values = {str(night): group[figure].dropna().to_numpy(dtype=float)
              for night, group in rows.groupby("invocation_id", sort=False)}
    medians = {night: float(np.median(v)) for night, v in values.items() if v.size}
    overall = float(np.median(list(medians.values())))
    return {night: {"repetitions": int(values[night].size), "median_s": median,
                    "cv": coefficient_of_variation(values[night]), "vs_median_of_nights": median / overall - 1}
            for night, median in medians.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latency_gate_nights.json")
    args = parser.parse_args()
    frame = HistoryStore(args.history).frame()
    frame = frame.loc[(frame["arrival"] == "poisson") & frame["stable"]]
    results: dict[str, dict[str, Any]] = {}
    for (workload, system), rows in frame.groupby(["workload", "system"], sort=False):
        name = f"{workload} {system}"
        results[name] = {figure: nights_of(rows, figure) for figure in FIGURES}
        for figure, nights in results[name].items():
            print(f"{name}, {figure}")
            for night, n in nights.items():
                print(f"  {night}: median {n['median_s']:.3f} s over {n['repetitions']} repetitions,"
                      f" CV {n['cv']:.1%}, {n['vs_median_of_nights']:+.1%} vs the nights' median")
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
