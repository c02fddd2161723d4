"""What the engine step recorder costs: continuous throughput with and without it.

Two continuous servers stay up side by side (an idle vLLM server sleeps), one with the
recorder (launchers.engine.step_recorder, as every launched server runs) and one on vLLM's own
scheduler class; each repetition runs the same workload through the harness on both,
back to back, the order alternating (AB, BA, ...) so a drift of the machine's speed
lands on both arms alike and each pair shares the machine's speed of that minute.

Reported: each arm's output tok/s per repetition, and the paired ratio recorded/plain
with a 95% bootstrap interval (harness.analysis.stats). The target is a cost <= 1%.

    .venv/bin/python benchmarks/recorder_overhead.py [--reps 8] [--workload cpu-fixed-closed16]

Writes benchmarks/results/recorder_overhead.json and prints a table.
"""

from __future__ import annotations

# This script drives load itself: gevent patches the process before anything opens a socket.
from harness.driver.gevent_process import patch_for_load

patch_for_load()

import argparse
import contextlib
import dataclasses
import json
import logging
import tempfile
from pathlib import Path

from harness.analysis.stats import median_ci
from harness.checks.recorder import ARMS, Arm, measure, order, plain_args, recorded_over_plain
from harness.driver.endpoint import load_tokenizer, probe_endpoint, warm_up
from harness.driver.interrupts import interrupt_main_on_signals
from harness.driver.runner import RunRequest
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.workload import load_specs
from launchers import ServerSpec, start
from launchers.spec import DEFAULT_BATCH_SIZE

ROOT = Path(__file__).resolve().parent.parent
BATCH = DEFAULT_BATCH_SIZE
# The CPU build of vLLM runs without async scheduling (launchers.server.VllmBuild).
EXTRA_ARGS: dict[Arm, tuple[str, ...]] = {"recorded": (), "plain": plain_args(async_scheduling=False)}


def launch(arm: Arm, scratch: Path, stack: contextlib.ExitStack):
    """A continuous server of this arm, warmed up; it stays up for every repetition."""
    spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=BATCH, vllm_args=EXTRA_ARGS[arm])
    server = stack.enter_context(start(spec, log_dir=scratch / f"server-{arm}"))
    endpoint = probe_endpoint(server.base_url, {}, None)
    warm_up(endpoint, {}, BATCH, "hello " * 8, DEFAULT_STALL_TIMEOUT_S)
    return server, endpoint


def run_arm(arm: Arm, server, endpoint, workload: str, out: Path) -> float:
    """Output tok/s of one run of `workload` on this arm's server."""
    spec = load_specs([workload])[0]
    return measure(arm, RunRequest(spec=spec, system="continuous", batch_size=BATCH, endpoint=endpoint,
                                   tokenizer=load_tokenizer(None, endpoint), out_dir=out,
                                   server=dataclasses.asdict(server.info), warmup=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--workload", default="cpu-fixed-closed16")
    args = parser.parse_args()
    # Ctrl-C stops the repetition under way and unwinds: its servers stop, saved results stay.
    interrupt_main_on_signals()
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    results: dict[Arm, list[float]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        scratch = Path(tmp)
        servers = {arm: launch(arm, scratch, stack) for arm in ARMS}
        for rep in range(args.reps):
            for arm in order(rep):
                server, endpoint = servers[arm]
                results[arm].append(run_arm(arm, server, endpoint, args.workload, scratch / f"{arm}-{rep + 1}"))
                print(f"rep {rep + 1} {arm}: {results[arm][-1]:.1f} output tok/s", flush=True)
    ratio = recorded_over_plain(results["recorded"], results["plain"])
    summary = {
        "workload": args.workload,
        "output_tok_s": results,
        "median_output_tok_s": {arm: median_ci(values).point for arm, values in results.items()},
        "recorded_over_plain": dataclasses.asdict(ratio),
    }
    out = ROOT / "benchmarks" / "results" / "recorder_overhead.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    for arm, values in results.items():
        print(f"{arm:9s} " + " ".join(f"{value:8.1f}" for value in values))
    print(f"recorded / plain: {ratio.point:.4f} (95% {ratio.low:.4f}-{ratio.high:.4f}, {ratio.method})")


if __name__ == "__main__":
    main()
