"""What each change to the step-cost fit is worth on real engine steps: R² with and without each.

Two changes (harness.analysis.step_cost_fit): the prompt's attention pairs as a feature
(`prefill_pairs`, recorded by the step recorder), and the rule that a step which ended every
running request is an idle gap, not a cost (before, a step that left requests waiting was
a cost: static's batch forming counted as compute). Fitted on the run directories given,
all steps of all runs together, as the report's one-speed fit is:

    .venv/bin/python benchmarks/step_cost_terms.py RUN_DIR... [--json OUT]

Per variant: R² over single steps, the steps fitted, and the summed predicted busy time
over the measured (what a makespan sees).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from harness.rundir.reader import load_run

FEATURES = ("running", "prefill_tokens", "context_tokens", "prefill_pairs")


def cycles(steps: pd.DataFrame, waiting_counts: bool) -> pd.DataFrame:
    """Busy steps with their cycle (start to next start): while requests run, or also while some wait."""
    ordered = steps.sort_values("t_s").reset_index(drop=True)
    cycle = ordered["t_s"].shift(-1) - ordered["t_s"]
    running_after = ordered["running"] - ordered["finished"].map(len)
    busy = (running_after > 0) | (ordered["waiting"] > 0) if waiting_counts else running_after > 0
    return ordered.assign(seconds=cycle)[busy & cycle.notna()]


def fit(table: pd.DataFrame, features: tuple[str, ...]) -> dict[str, float]:
    design = np.column_stack([np.ones(len(table)), *(table[name].to_numpy(dtype=float) for name in features)])
    seconds = table["seconds"].to_numpy(dtype=float)
    coefficients, _ = nnls(design, seconds)
    predicted = design @ coefficients
    total = float(np.sum((seconds - seconds.mean()) ** 2))
    return {"r_squared": 1 - float(np.sum((seconds - predicted) ** 2)) / total, "steps": len(table),
            "sum_ratio": float(predicted.sum() / seconds.sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tables = [load_run(path).steps for path in args.runs]
    steps = [table for table in tables if table is not None and not table.empty]
    if any(not np.isfinite(table["prefill_pairs"]).all() for table in steps):
        raise SystemExit("these runs' steps did not record prefill_pairs (a server from before the recorder did)")
    result = {}
    for name, waiting_counts, features in (
        ("before: waits counted, no pairs", True, FEATURES[:3]),
        ("idle rule only", False, FEATURES[:3]),
        ("pairs only", True, FEATURES),
        ("after: both", False, FEATURES),
    ):
        figures = fit(pd.concat([cycles(table, waiting_counts) for table in steps]), features)
        result[name] = figures
        print(f"{name:>32}: R² {figures['r_squared']:.3f} over {figures['steps']:,} steps,"
              f" summed predicted / measured {figures['sum_ratio']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
