"""What the step recorder adds to each engine step, timed in isolation at GPU batch sizes.

Whole-server A/B runs (recorder_overhead.py) move by several percent from one run to the
next on a shared machine, so they cannot resolve the recorder's own cost. This times
`StepRecorder.schedule` and `update_from_output` in front of a stand-in scheduler whose
every step is a prepared step: B running requests with 512-token prompts decoding (one
admission and one finish per step), or a step that admits B requests at once. The
stand-in's own work is timed alone and subtracted, so what remains is the recorder.
Steps are driven in the engine core's async order (schedule() of step N+1 before
update_from_output() of step N, as on a GPU) and in the synchronous order, with the
lines written to a real file.

The goal: at most 50 us per step at 256 running requests (1% of a ~5 ms decode step).

    .venv/bin/python benchmarks/recorder_cost.py [--steps 20000] [RUN_DIR ...]

Writes benchmarks/results/recorder_cost.json and prints a table; with run directories,
also the recorder's share of each run's median logged step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from harness.analysis.engine import step_seconds
from launchers.engine.engine_env import STEP_LOG_ENV
from launchers.engine.step_recorder import StepRecorder

ROOT = Path(__file__).resolve().parent.parent
PROMPT_TOKENS, CONTEXT = 512, 600
CASES = (("decode", 64), ("decode", 256), ("decode", 1024), ("admit", 256))
REPEATS = 5


class PreparedScheduler:
    """A scheduler whose every step is the same prepared step, in a fresh output object."""

    def __init__(self, kind: str, batch: int) -> None:
        ids = [f"cmpl-bb-abcd1234-{i}-0-1f2e3d4c" for i in range(batch)]
        admitting = kind == "admit"
        computed = PROMPT_TOKENS if admitting else CONTEXT
        self.requests = {rid: SimpleNamespace(num_computed_tokens=computed, num_prompt_tokens=PROMPT_TOKENS)
                         for rid in ids}
        self.running = list(ids)
        self.waiting = list(range(40))
        self.finished_req_ids: set[str] = set()
        self._finishing = ids[-1]
        new = ids if admitting else ids[:1]
        self._fields = {
            "num_scheduled_tokens": dict.fromkeys(ids, PROMPT_TOKENS if admitting else 1),
            "total_num_scheduled_tokens": batch * (PROMPT_TOKENS if admitting else 1),
            "scheduled_new_reqs": [SimpleNamespace(req_id=rid, num_computed_tokens=0) for rid in new],
            "scheduled_cached_reqs": SimpleNamespace(
                num_computed_tokens=[] if admitting else [CONTEXT - 1] * (batch - 1), resumed_req_ids=set()
            ),
        }

    def schedule(self, *args, **kwargs):
        self.finished_req_ids = set()
        return SimpleNamespace(**self._fields)

    def update_from_output(self, scheduler_output, model_runner_output):
        self.finished_req_ids.add(self._finishing)


# For the type checker StepRecorder is a vLLM Scheduler; the stand-in has only the few
# attributes the recorder reads, in simpler types.
class Recorded(StepRecorder, PreparedScheduler):  # type: ignore[misc]
    pass


def time_steps(scheduler: PreparedScheduler, steps: int, depth: int) -> float:
    """Seconds per step of schedule() + update_from_output(), with a batch queue of `depth`."""
    queue: deque = deque()
    began = time.perf_counter()
    for _ in range(steps):
        queue.appendleft(scheduler.schedule())
        if len(queue) == depth:
            scheduler.update_from_output(queue.pop(), None)
    while queue:
        scheduler.update_from_output(queue.pop(), None)
    return (time.perf_counter() - began) / steps


def recorder_us(kind: str, batch: int, steps: int, depth: int) -> list[float]:
    """The recorder's microseconds per step, one figure per repeat (recorded minus bare)."""
    figures = []
    for _ in range(REPEATS):
        recorded = time_steps(Recorded(kind, batch), steps, depth)
        bare = time_steps(PreparedScheduler(kind, batch), steps, depth)
        figures.append((recorded - bare) * 1e6)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("run_dirs", nargs="*", type=Path, help="runs whose logged median step time to compare with")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        os.environ[STEP_LOG_ENV] = str(Path(scratch) / "steps.jsonl")
        for kind, batch in CASES:
            for order, depth in (("async", 2), ("sync", 1)):
                steps = max(200, args.steps * 16 // batch)
                figures = recorder_us(kind, batch, steps, depth)
                rows.append({"step": kind, "batch": batch, "order": order, "steps_timed": steps,
                             "us_per_step_median": statistics.median(figures), "us_per_step_all": figures})
    decode_256 = next(r for r in rows if (r["step"], r["batch"], r["order"]) == ("decode", 256, "async"))
    shares = {}
    for run_dir in args.run_dirs:
        median_step_s = float(np.median(step_seconds(pd.read_parquet(run_dir / "steps.parquet"))))
        shares[run_dir.name] = {"median_step_ms": median_step_s * 1000,
                                "recorder_share_at_256": decode_256["us_per_step_median"] * 1e-6 / median_step_s}
    result = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
              "goal_us_at_256": 50.0, "cases": rows, "runs": shares}
    out = ROOT / "benchmarks" / "results" / "recorder_cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'step':<8}{'B':>6}  {'order':<6}{'us/step (median of 5)':>24}")
    for row in rows:
        print(f"{row['step']:<8}{row['batch']:>6}  {row['order']:<6}{row['us_per_step_median']:>24.1f}")
    for name, share in shares.items():
        print(f"  {name}: median step {share['median_step_ms']:.2f} ms -> {share['recorder_share_at_256']:.2%}")


if __name__ == "__main__":
    main()
