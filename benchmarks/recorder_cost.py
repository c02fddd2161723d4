"""What the step recorder adds to each engine step, timed in isolation.

The A/B benchmark (recorder_overhead.py) compares whole servers, but on a shared 2-core
VM whole runs move by ±15% from one to the next, so it cannot resolve 1%. This one times
the recorder's own work: `StepRecorder.schedule` and `update_from_output` in front of a
stand-in scheduler that returns a prepared step of B running requests (B=16, two new
admissions, one finish, 512-token prompts), its lines written to a real file. The stand-in
costs nothing, so what is timed is the recorder alone. Divided by the median step time
the engine logged in a run directory, that is the recorder's share of a step.

    .venv/bin/python benchmarks/recorder_cost.py [--steps 200000] [RUN_DIR ...]

Writes benchmarks/results/recorder_cost.json and prints per-step microseconds and shares.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from launchers.engine_env import STEP_LOG_ENV
from launchers.step_recorder import StepRecorder

ROOT = Path(__file__).resolve().parent.parent
BATCH, PROMPT_TOKENS, CONTEXT = 16, 512, 600


class PreparedScheduler:
    """A scheduler whose every step is the same prepared step of BATCH running requests."""

    def __init__(self) -> None:
        ids = [f"cmpl-bb-abcd1234-{i}-0" for i in range(BATCH)]
        self.requests = {rid: SimpleNamespace(num_computed_tokens=CONTEXT, num_prompt_tokens=PROMPT_TOKENS)
                         for rid in ids}
        self.running = list(ids)
        self.waiting = list(range(40))
        self.finished_req_ids = {ids[-1]}
        self._output = SimpleNamespace(
            num_scheduled_tokens=dict.fromkeys(ids, 1),
            total_num_scheduled_tokens=BATCH,
            scheduled_new_reqs=[SimpleNamespace(req_id=rid) for rid in ids[:2]],
            scheduled_cached_reqs=SimpleNamespace(resumed_req_ids=set()),
        )

    def schedule(self, *args, **kwargs):
        return self._output

    def update_from_output(self, scheduler_output, model_runner_output):
        return None


# For the type checker StepRecorder is a vLLM Scheduler; the stand-in has only the few
# attributes the recorder reads, in simpler types.
class Recorded(StepRecorder, PreparedScheduler):  # type: ignore[misc]
    pass


def time_steps(scheduler: PreparedScheduler, steps: int) -> float:
    """Seconds per step of schedule() + update_from_output() on `scheduler`."""
    began = time.perf_counter()
    for _ in range(steps):
        output = scheduler.schedule()
        scheduler.update_from_output(output, None)
    return (time.perf_counter() - began) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("run_dirs", nargs="*", type=Path, help="runs whose logged median step time to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        os.environ[STEP_LOG_ENV] = str(Path(scratch) / "steps.jsonl")
        recorded = time_steps(Recorded(), args.steps)
        bare = time_steps(PreparedScheduler(), args.steps)
    added_s = recorded - bare
    shares = {}
    for run_dir in args.run_dirs:
        steps = pd.read_parquet(run_dir / "steps.parquet")
        median_step_s = float((steps["end_s"] - steps["t_s"]).median())
        shares[run_dir.name] = {"median_step_ms": median_step_s * 1000, "recorder_share": added_s / median_step_s}
    result = {"batch": BATCH, "steps_timed": args.steps, "recorder_us_per_step": added_s * 1e6, "runs": shares}
    out = ROOT / "benchmarks" / "results" / "recorder_cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"recorder: {added_s * 1e6:.1f} us per step of {BATCH} requests")
    for name, row in shares.items():
        print(f"  {name}: median step {row['median_step_ms']:.2f} ms -> {row['recorder_share']:.2%} of a step")


if __name__ == "__main__":
    main()
