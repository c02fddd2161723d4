"""Our load driver against GuideLLM, a second independent client, on one continuous server.

Both clients send the same load to one launched continuous vLLM server (tiny model,
--max-num-seqs = the concurrency), alternately: the workload cpu-fixed-closed16, 64-token
prompts and exactly 256 output tokens at 16 in flight in a closed loop, 320 requests
(about 35 s a run on 2 cores). Ours is `batchbench run` with 16 users; GuideLLM 0.8.x
(`guidellm run`, its own venv, not a project dependency) is its `concurrent` profile
with 16 streams and a max_requests constraint of 320, on /v1/completions, streaming.

Both send the same prompt texts: our plan's prompts, handed to GuideLLM as a JSON-lines
file with `prompt_tokens_count` and `output_tokens_count` columns. GuideLLM's own
`synthetic_text` prompts do not fit the tiny model: it draws English text, keeps the
first N token ids and decodes them without special tokens, and under the tiny model's
4096-word vocabulary most words are <unk> and vanish (0-6 tokens instead of 64; an
empty prompt errors). Both force the output length: GuideLLM sends max_tokens = the
row's output_tokens_count with ignore_eos and stop=None; we send vLLM's min_tokens and
ignore_eos.

Compared, each client's own figure:
- output tok/s: ours output_tok_s (useful tokens over first send to last end);
  GuideLLM's output_tokens_per_second.successful.mean (tokens over its measurement
  window). Also each on our window definition (first request start to last end), from
  GuideLLM's per-request records.
- TTFT p50 and p99: first token time minus send time, per request.
- ITL p50: GuideLLM's inter_token_latency_ms is per request (last token - first token)
  / (output tokens - 1), weighted by output tokens - 1 (all equal here), so its p50 is
  compared with our TPOT p50, the same definition. Our per-gap ITL p50 is listed too.
Targets: output tok/s within 3%, TTFT and ITL within 10%.

Repetition r of each client runs back to back, who goes first alternating; each metric
is summarised as the median of the per-pair relative differences ours/theirs - 1, their
spread (min, max) and a 95% bootstrap interval (harness.analysis.stats.paired_ratio_ci).
A launched server's step log gives the engine's own output tok/s and median time per
output token for every run, and its TTFT histogram the server's mean TTFT
(benchmarks/compare_vllm_bench.py): client / engine ratios share the server's speed,
so they separate a difference between the clients from the server's drift.

    .venv/bin/python benchmarks/guidellm_compare.py [--reps 3] [--guidellm-venv DIR] [--endpoint URL]

Writes benchmarks/results/guidellm_compare.json and prints a table. The GuideLLM venv
(default $BATCHBENCH_CACHE/guidellm-venv) is made once, outside the repository
(without it the script prints this command for its path and exits 2):
    V=~/.cache/batchbench/guidellm-venv; python3 -m venv $V && $V/bin/pip install 'guidellm==0.8.1'
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness.analysis.metrics import metrics_for_run
from harness.analysis.stats import paired_ratio_ci
from harness.rundir.reader import load_run
from harness.settings import Settings
from harness.workload import build_plan, load_spec
from harness.workload.prompts import make_prompts
from harness.workload.tokenizer_file import file_tokenizer
from launchers import ServerSpec, resolve_model, start

ROOT = Path(__file__).resolve().parent.parent
# The vllm-bench-serve comparison's helpers, as a module of the repository's root.
sys.path.insert(0, str(ROOT))
from benchmarks.compare_vllm_bench import (  # noqa: E402
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    client_cpu_s,
    measured,
)

WORKLOAD = "cpu-fixed-closed16"
MODEL = "tiny"
GUIDELLM_PIN = "guidellm==0.8.1"
CLIENTS = ("batchbench", "guidellm")
# Relative-difference targets of issue 43 for the headline figures.
TARGETS = {"output_tok_s": 0.03, "ttft_p50_ms": 0.10, "ttft_p99_ms": 0.10, "itl_p50_ms": 0.10}


def default_venv() -> Path:
    return Settings.from_env().cache_dir / "guidellm-venv"


def make_command(venv: Path) -> str:
    """The one command that makes GuideLLM's venv at `venv`."""
    return f"python3 -m venv {venv} && {venv}/bin/pip install '{GUIDELLM_PIN}'"


def workload_file(requests: int, concurrency: int, scratch: Path) -> Path:
    """cpu-fixed-closed16 with its request count and users set: the load both clients send."""
    spec = yaml.safe_load((ROOT / "workloads" / f"{WORKLOAD}.yaml").read_text())
    spec["num_requests"] = requests
    spec["arrival"]["users"] = concurrency
    path = scratch / f"{WORKLOAD}-{requests}x{concurrency}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def guidellm_data(workload: Path, tokenizer_dir: Path, scratch: Path) -> Path:
    """Our plan's prompts (the texts `batchbench run` sends) as GuideLLM's dataset, lengths as columns."""
    plan = build_plan(load_spec(workload))
    tokenizer = file_tokenizer(tokenizer_dir)
    if tokenizer is None:
        raise SystemExit(f"no tokenizer.json usable without transformers in {tokenizer_dir}")
    path = scratch / "guidellm-prompts.jsonl"
    with path.open("w") as rows:
        for request, prompt in zip(plan.requests, make_prompts(plan, tokenizer), strict=True):
            rows.write(json.dumps({"prompt": prompt, "prompt_tokens_count": request.prompt_tokens,
                                   "output_tokens_count": request.output_tokens}) + "\n")
    return path


def ours_command(base_url: str, workload: Path, concurrency: int, out: Path, telemetry_interval_s: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", base_url,
            "--model", MODEL, "--max-num-seqs", str(concurrency), "--out", str(out), "--no-warmup",
            "--no-history", "--telemetry-interval-s", telemetry_interval_s]


def guidellm_command(venv: Path, base_url: str, data: Path, tokenizer_dir: Path, requests: int,
                     concurrency: int, out: Path) -> list[str]:
    return [str(venv / "bin" / "guidellm"), "run",
            "--backend", f"kind=openai_http,target={base_url},model={MODEL},request_format=/v1/completions",
            "--profile", f"kind=concurrent,streams={concurrency}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer_dir}",
            "--data", f"kind=json_file,path={data}",
            "--output", f"kind=json,path={out}",
            "--disable-console-interactive"]


def run_client(command: list[str], env: dict[str, str] | None = None) -> float:
    """Run one client to completion; its CPU seconds. A failure raises with its output's tail."""
    cpu = client_cpu_s()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise RuntimeError(f"exit {done.returncode}: {shlex.join(command)}\n{tail}")
    return client_cpu_s() - cpu


def ours(base_url: str, workload: Path, concurrency: int, telemetry_interval_s: str, scratch: Path,
         rep: int) -> dict[str, float]:
    out = scratch / f"batchbench-{rep}"
    cpu = run_client(ours_command(base_url, workload, concurrency, out, telemetry_interval_s))
    metrics = metrics_for_run(load_run(out))
    return {
        "output_tok_s": metrics.output_tok_s,
        "output_tok_s_first_send_to_last_end": metrics.output_tok_s,
        "ttft_p50_ms": metrics.ttft_s.p50 * 1000,
        "ttft_p99_ms": metrics.ttft_s.p99 * 1000,
        "mean_ttft_ms": metrics.ttft_s.mean * 1000,
        "itl_p50_ms": metrics.tpot_s.p50 * 1000,
        "itl_per_gap_p50_ms": metrics.itl_s.p50 * 1000,
        "prompt_tokens_mean": metrics.prompt_tokens / metrics.ok,
        "output_tokens_mean": metrics.generated_tokens / metrics.ok,
        "failed": metrics.failed,
        "client_cpu_ms_per_1k_tokens": cpu * 1e6 / max(metrics.generated_tokens, 1),
    }


def guidellm_figures(report: dict[str, Any]) -> dict[str, float]:
    """The figures of GuideLLM's JSON report (one benchmark), and tok/s on our window definition."""
    benchmark = report["benchmarks"][0]
    metrics = benchmark["metrics"]

    def ok(name: str) -> dict[str, Any]:
        summary: dict[str, Any] = metrics[name]["successful"]
        return summary

    requests = benchmark["requests"]["successful"]
    tokens = sum(row["output_metrics"]["text_tokens"] or 0 for row in requests)
    first = min(row["info"]["timings"]["request_start"] for row in requests)
    last = max(row["info"]["timings"]["request_end"] for row in requests)
    totals = metrics["request_totals"]
    return {
        "output_tok_s": ok("output_tokens_per_second")["mean"],
        "output_tok_s_first_send_to_last_end": tokens / (last - first),
        "ttft_p50_ms": ok("time_to_first_token_ms")["percentiles"]["p50"],
        "ttft_p99_ms": ok("time_to_first_token_ms")["percentiles"]["p99"],
        "mean_ttft_ms": ok("time_to_first_token_ms")["mean"],
        "itl_p50_ms": ok("inter_token_latency_ms")["percentiles"]["p50"],
        "prompt_tokens_mean": ok("prompt_token_count")["mean"],
        "output_tokens_mean": ok("output_token_count")["mean"],
        "failed": totals["errored"] + totals["incomplete"],
    }


def theirs(venv: Path, workers: int, base_url: str, data: Path, tokenizer_dir: Path, requests: int,
           concurrency: int, scratch: Path, rep: int) -> dict[str, float]:
    out = scratch / f"guidellm-{rep}.json"
    env = {**os.environ, "GUIDELLM__MAX_WORKER_PROCESSES": str(workers)}
    cpu = run_client(guidellm_command(venv, base_url, data, tokenizer_dir, requests, concurrency, out), env)
    figures = guidellm_figures(json.loads(out.read_text()))
    if figures["failed"] or figures["output_tokens_mean"] != OUTPUT_TOKENS:
        raise RuntimeError(f"GuideLLM run {rep}: {figures['failed']} requests failed, "
                           f"{figures['output_tokens_mean']} output tokens a request on average ({out})")
    tokens = figures["output_tokens_mean"] * (requests - figures["failed"])
    return {**figures, "client_cpu_ms_per_1k_tokens": cpu * 1e6 / max(tokens, 1)}


def summarise(results: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per metric both clients report: medians, per-pair relative differences, their median,
    spread and 95% interval (where every value is finite and positive)."""
    summary: dict[str, dict[str, Any]] = {}
    for metric in results["batchbench"][0]:
        if metric not in results["guidellm"][0]:
            continue
        a = np.array([run[metric] for run in results["batchbench"]], dtype=float)
        b = np.array([run[metric] for run in results["guidellm"]], dtype=float)
        row: dict[str, Any] = {"batchbench": float(np.median(a)), "guidellm": float(np.median(b))}
        if np.all(np.isfinite(a) & (a > 0)) and np.all(np.isfinite(b) & (b > 0)):
            differences = a / b - 1
            ratio = paired_ratio_ci(a, b)
            row |= {"relative_differences": differences.tolist(), "median": float(np.median(differences)),
                    "spread": [float(differences.min()), float(differences.max())],
                    "interval": [ratio.low - 1, ratio.high - 1], "method": ratio.method}
            if metric in TARGETS:
                row |= {"target": TARGETS[metric], "met": bool(abs(row["median"]) <= TARGETS[metric])}
        summary[metric] = row
    return summary


def compare(args: argparse.Namespace, base_url: str, step_log: Path | None) -> dict[str, Any]:
    tokenizer_dir = Path(resolve_model(MODEL).path)
    version = subprocess.run([str(args.guidellm_venv / "bin" / "guidellm"), "--version"], capture_output=True,
                             text=True, check=True).stdout.split()[-1]
    with tempfile.TemporaryDirectory(prefix="guidellm-compare-") as tmp:
        scratch = Path(tmp)
        workload = workload_file(args.requests, args.concurrency, scratch)
        data = guidellm_data(workload, tokenizer_dir, scratch)
        clients: dict[str, Callable[[int], dict[str, float]]] = {
            "batchbench": partial(ours, base_url, workload, args.concurrency, args.telemetry_interval_s, scratch),
            "guidellm": partial(theirs, args.guidellm_venv, args.guidellm_workers, base_url, data, tokenizer_dir,
                                args.requests, args.concurrency, scratch),
        }
        commands = {
            "batchbench": shlex.join(ours_command(base_url, workload, args.concurrency, scratch / "batchbench-R",
                                                  args.telemetry_interval_s)),
            "guidellm": f"GUIDELLM__MAX_WORKER_PROCESSES={args.guidellm_workers} " + shlex.join(guidellm_command(
                args.guidellm_venv, base_url, data, tokenizer_dir, args.requests, args.concurrency,
                scratch / "guidellm-R.json")),
        }
        if not args.no_warmup_pass:
            # One throwaway pass of each: compiles every batch shape the runs will use.
            for name, client in clients.items():
                client(-1)
                print(f"warm-up pass {name}: done", flush=True)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
        firsts: list[str] = []
        for rep in range(args.reps):
            # Alternate who goes first, so drift in the server's speed hits both alike.
            order = list(clients.items()) if rep % 2 == 0 else list(clients.items())[::-1]
            firsts.append(order[0][0])
            for name, client in order:
                results[name].append(measured(partial(client, rep), base_url, step_log, tpot_figure="itl_p50_ms"))
                print(f"rep {rep} {name}: " + json.dumps({k: round(v, 3) for k, v in results[name][-1].items()}),
                      flush=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"), "workload": WORKLOAD, "requests": args.requests,
        "concurrency": args.concurrency, "prompt_tokens": PROMPT_TOKENS, "output_tokens": OUTPUT_TOKENS,
        "reps": args.reps, "guidellm_version": version, "guidellm_workers": args.guidellm_workers,
        "telemetry_interval_s": float(args.telemetry_interval_s), "endpoint": args.endpoint,
        "commands": commands, "first_in_pair": firsts, "runs": results, "summary": summarise(results),
    }


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{'metric':36} {'batchbench':>11} {'guidellm':>11} {'median diff':>12}  {'spread':>17}  target")
    for metric, row in report["summary"].items():
        if "median" not in row:
            continue
        low, high = row["spread"]
        target = f"±{row['target']:.0%} {'met' if row['met'] else 'NOT met'}" if "target" in row else ""
        print(f"{metric:36} {row['batchbench']:11.2f} {row['guidellm']:11.2f} {row['median']:+12.1%}  "
              f"[{low:+.1%}, {high:+.1%}]  {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="interleaved pairs (default 3)")
    parser.add_argument("--guidellm-venv", type=Path, default=default_venv(),
                        help="GuideLLM's own venv (default: %(default)s)")
    parser.add_argument("--guidellm-workers", type=int, default=1,
                        help="GuideLLM worker processes (GUIDELLM__MAX_WORKER_PROCESSES; its default is "
                             "min(concurrency, 10), too many for 2 cores); default 1")
    parser.add_argument("--endpoint", help="a running server serving 'tiny' (default: launch a continuous one)")
    parser.add_argument("--requests", type=int, default=320, help="requests per run (default: the workload's 320)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="users / streams, and the launched server's --max-num-seqs (default 16)")
    parser.add_argument("--telemetry-interval-s", default="1000",
                        help="our driver's /metrics polling; default 1000, off, as GuideLLM does not poll")
    parser.add_argument("--no-warmup-pass", action="store_true", help="skip the throwaway pass of each client")
    parser.add_argument("--result", default="guidellm_compare.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    if not (args.guidellm_venv / "bin" / "guidellm").is_file():
        print(f"no GuideLLM in {args.guidellm_venv}; make it with:\n  {make_command(args.guidellm_venv)}",
              file=sys.stderr)
        sys.exit(2)
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    if args.endpoint:
        report = compare(args, args.endpoint.rstrip("/"), step_log=None)
    else:
        with start(ServerSpec(mode="continuous", model=MODEL, max_num_seqs=args.concurrency)) as server:
            assert server.info.step_log is not None
            report = compare(args, server.base_url, Path(server.info.step_log))
    out = ROOT / "benchmarks" / "results" / args.result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print_table(report)
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
