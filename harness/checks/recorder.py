"""What the engine step recorder costs: continuous throughput with it and without it, alternated.

Two continuous servers stay up side by side (an idle vLLM server sleeps): one as every
launched server runs, through the recorder (launchers.engine.step_recorder), and one on vLLM's
own scheduler class. Each repetition runs the same workload on both, back to back, the
order alternating (AB, BA, ...) so a drift of the machine's speed lands on both arms
alike and each pair shares the machine's speed of that minute. The cost is one minus the
paired ratio recorded/plain (the geometric mean of the pairs' ratios), with its 95% t
interval on their logs (harness.analysis.stats.paired_ratio_ci).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from harness.analysis.metrics import metrics_for_run
from harness.analysis.stats import Estimate, paired_ratio_ci
from harness.errors import ServerError
from harness.rundir.reader import load_run

if TYPE_CHECKING:
    from harness.driver.runner import RunRequest

Arm = Literal["recorded", "plain"]
ARMS: tuple[Arm, ...] = ("recorded", "plain")
# vLLM's own scheduler classes, by async scheduling (launchers.server picks the recorder's
# async variant when it is on, so the plain arm must too: a plain Scheduler would turn it off).
VLLM_SCHEDULERS = {
    False: "vllm.v1.core.sched.scheduler.Scheduler",
    True: "vllm.v1.core.sched.async_scheduler.AsyncScheduler",
}
# The recorder's cost is held to this share of throughput (its own work is ~14 us a step,
# benchmarks/recorder_cost.py); the check fails only when the whole interval lies above it.
MAX_COST = 0.01


def plain_args(async_scheduling: bool) -> tuple[str, ...]:
    """Extra vLLM arguments that put vLLM's own scheduler back in place of the recorder (the last flag wins)."""
    return ("--scheduler-cls", VLLM_SCHEDULERS[async_scheduling])


def order(repetition: int) -> tuple[Arm, ...]:
    """The arms of repetition `repetition` (0-based) in the order they run: AB, BA, AB, ..."""
    return ARMS if repetition % 2 == 0 else ARMS[::-1]


def measure(arm: Arm, request: RunRequest) -> float:
    """Run `request` on this arm's server; its output tok/s.

    ServerError when the step log disagrees with the arm: the recorded server must write
    the run's steps and the plain one none (else the arms are not what they claim).
    """
    # The runner imports Locust, which patches the process for gevent: only when a run is made.
    from harness.driver.runner import execute

    execute(request)
    run = load_run(request.out_dir)
    recorded = run.steps is not None and not run.steps.empty
    if recorded != (arm == "recorded"):
        raise ServerError(f"{arm} arm: the step log was {'' if recorded else 'not '}written ({request.out_dir})")
    return metrics_for_run(run).output_tok_s


def recorded_over_plain(recorded: Sequence[float], plain: Sequence[float]) -> Estimate:
    """Paired ratio recorded/plain (geometric mean, 95% t interval on the logs): 1 - it is the recorder's cost."""
    return paired_ratio_ci(recorded, plain)
