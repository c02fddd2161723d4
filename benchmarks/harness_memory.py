"""The harness's own memory across many runs in one process, as a night runs them.

Against the calibration endpoint (harness.calibration: a zero-cost stream, so only the
client is measured, and runs go fast), as benchmarks/client_ceiling.py starts it:
one `batchbench reproduce --endpoint` process runs cpu-fixed-closed16 (320 requests of
64 + 256 tokens, 16 users) --repetitions times, continuous and naive each time, writing
its preliminary report after each repetition: a night's shape, many runs in one process.
Its resident memory and open descriptors are sampled every half second and read as each
run's manifest turns complete.

    .venv/bin/python benchmarks/harness_memory.py [--repetitions 10]

Writes benchmarks/results/harness_memory.json and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from launchers import resolve_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.client_ceiling import endpoint  # noqa: E402

WORKLOAD = "cpu-fixed-closed16"
def across_runs(base_url: str, tokenizer: str, repetitions: int, scratch: Path) -> dict[str, Any]:
    """RSS of one reproduce process at each run's end."""
    out = scratch / "job"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", "--endpoint", base_url, "--tokenizer", tokenizer,
         "--workloads", WORKLOAD, "--repetitions", str(repetitions), "--max-num-seqs", "16", "--no-history",
         "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched = psutil.Process(process.pid)
    ends: list[dict[str, Any]] = []
    seen: set[str] = set()
    while process.poll() is None:
        try:
            rss, fds = watched.memory_info().rss / 2**20, watched.num_fds()
        except psutil.NoSuchProcess:
            break
        for manifest in sorted((out / "runs").glob("*/manifest.json")) if (out / "runs").is_dir() else []:
            if manifest.parent.name not in seen and json.loads(manifest.read_text()).get("complete"):
                seen.add(manifest.parent.name)
                ends.append({"run": manifest.parent.name, "rss_mib": rss, "fds": fds})
        time.sleep(0.5)
    return {"exit_code": process.returncode, "runs": ends}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=10)
    args = parser.parse_args()
    tokenizer = str(resolve_model("tiny").path)
    (ROOT / "runs").mkdir(exist_ok=True)
    with endpoint(tokenizer) as served, tempfile.TemporaryDirectory(dir=ROOT / "runs") as scratch:
        report = across_runs(served.base_url, tokenizer, args.repetitions, Path(scratch))
        for run in report["runs"]:
            print(f"  {run['run']:40s} rss {run['rss_mib']:7.1f} MiB  fds {run['fds']}")
    path = ROOT / "benchmarks" / "results" / "harness_memory.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {path}")
    return 0 if report["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
