"""Static batching from the client against the engine's own, read from the engine's step logs.

Takes run directories (a night of docs/validation/client-static/suite.yaml, or any runs
of `static` and `client-static` on servers batchbench launched) and sets the two systems
side by side per workload: total tok/s (engine window), each repetition paired by its order
(the ratio's geometric mean and t interval on logs, harness.analysis.stats.paired_ratio_ci),
the same at one machine speed (harness.analysis.speed: every run's busy steps re-priced by
one step cost fitted on all of them, idle gaps as measured: the schedules compared, not
the machine's speed at the moment each ran), and the schedule the step log shows. A batch
is a span of steps from one in which nothing was running before to the next such step: per
batch, the requests admitted, the steps that admitted any (the static plugin admits a whole
batch at once, its prompts prefilled over as many steps as vLLM's token budget needs; a wave
sent by the client reaches vLLM's continuous scheduler over a few milliseconds, so it may be
admitted over more), and the steps the batch took.

    .venv/bin/python benchmarks/client_static.py RUN_DIR... [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.engine import engine_metrics
from harness.analysis.metrics import metrics_for_run
from harness.analysis.speed import RunTiming, normalise
from harness.analysis.stats import paired_ratio_ci
from harness.rundir.reader import load_run

SYSTEMS = ("static", "client-static")


def batches(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per batch: requests admitted, steps that admitted, steps taken (see the module docstring)."""
    ordered = steps.sort_values("t_s").reset_index(drop=True)
    admitted = ordered["admitted"].map(len).to_numpy()
    finished = ordered["finished"].map(len).to_numpy()
    running_after = ordered["running"].to_numpy() - finished
    starts = [0] + [i + 1 for i in range(len(ordered) - 1) if running_after[i] <= 0]
    bounds = [*starts, len(ordered)]
    rows = []
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        if begin == end:
            continue
        span = admitted[begin:end]
        rows.append({"admitted": int(span.sum()), "admitting_steps": int((span > 0).sum()), "steps": end - begin})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tok_s: dict[tuple[str, str], list[float]] = defaultdict(list)
    shapes: dict[tuple[str, str], list[pd.DataFrame]] = defaultdict(list)
    timings: dict[str, RunTiming] = {}
    keys: dict[str, tuple[str, str]] = {}
    for path in sorted(args.runs):
        run = load_run(path)
        system = run.manifest.system
        if system not in SYSTEMS or run.steps is None:
            continue
        key = (run.manifest.workload.name, system)
        metrics = metrics_for_run(run)
        tokens = metrics.prompt_tokens + metrics.useful_tokens
        makespan = engine_metrics(run.steps, run.manifest.batch_size).makespan_s
        # (prompt + useful) tokens over the engine's own window, as the history's engine_total_tok_s.
        tok_s[key].append(tokens / makespan)
        shapes[key].append(batches(run.steps))
        timings[str(path)], keys[str(path)] = RunTiming(run.steps, makespan, tokens), key
    fit, normalised = normalise(timings)
    at_one_speed: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path, run_figures in normalised.items():
        at_one_speed[keys[path]].append(run_figures.total_tok_s)
        print(f"{Path(path).name}: machine speed {run_figures.speed:.3f} (busy seconds measured / at one speed)")
    if fit is not None:
        print(f"one speed: a step cost fitted on {fit.steps:,} busy steps of every run, R² {fit.r_squared:.3f}")
    result: dict[str, Any] = {}
    for workload in sorted({workload for workload, _ in tok_s}):
        static, client = tok_s[(workload, "static")], tok_s[(workload, "client-static")]
        pairs = min(len(static), len(client))
        ratio = paired_ratio_ci(np.array(client[:pairs]), np.array(static[:pairs]))
        static_fixed, client_fixed = at_one_speed[(workload, "static")], at_one_speed[(workload, "client-static")]
        fixed = paired_ratio_ci(np.array(client_fixed[:pairs]), np.array(static_fixed[:pairs]))
        figures: dict[str, dict[str, Any]] = {
            "client_over_static": {"ratio": ratio.point, "low": ratio.low, "high": ratio.high,
                                   "label": ratio.interval_label},
            "client_over_static_at_one_speed": {"ratio": fixed.point, "low": fixed.low, "high": fixed.high,
                                                "label": fixed.interval_label}}
        for name in SYSTEMS:
            table = pd.concat(shapes[(workload, name)])
            figures[name] = {
                "engine_total_tok_s": tok_s[(workload, name)], "batches": len(table),
                "admitted_per_batch": float(table["admitted"].mean()),
                "admitting_steps_per_batch": float(table["admitting_steps"].mean()),
                "steps_per_batch": float(table["steps"].mean()),
            }
        result[workload] = figures
        print(f"{workload}: client-static / static {ratio.point:.3f} ({ratio.low:.3f}-{ratio.high:.3f},"
              f" {ratio.interval_label}); at one speed {fixed.point:.3f} ({fixed.low:.3f}-{fixed.high:.3f})")
        for name in SYSTEMS:
            f = figures[name]
            print(f"  {name:>13}: tok/s {', '.join(f'{v:,.0f}' for v in f['engine_total_tok_s'])};"
                  f" {f['batches']} batches, {f['admitted_per_batch']:.2f} admitted and"
                  f" {f['steps_per_batch']:.1f} steps per batch, admitted over {f['admitting_steps_per_batch']:.2f}"
                  " steps")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
