"""How big each check of `batchbench gpu-check` is, on a GPU and on this project's 2-core CPU machines.

On a GPU the checks run at full strength in about 15 minutes on Llama-3.1-8B's shapes
(dummy weights, no download). On the CPU the same checks run on the tiny model, scaled to
what two cores do in a few minutes: B = 16 and smaller plans, with the mode check kept at
full strength (ten attempts per mode) and no recorder A/B.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSizes:
    """Every size the checks take; one preset per device, each overridable from the command line."""

    model: str
    batch_size: int
    mode_attempts: int
    recorder_pairs: int
    # Requests per recorder run: a closed loop of B users, RECORDER_PROMPT_TOKENS in, RECORDER_OUTPUT_TOKENS out.
    recorder_requests: int
    repro_workloads: tuple[str, ...]
    # Requests per reproduction run (the workloads' own counts are sized for a full sweep).
    repro_requests: int
    # Each server's share of GPU memory: two servers are up side by side (None on the CPU).
    gpu_memory_share: float | None
    # Start servers at once (harness.checks.servers): on the CPU, not on a GPU.
    start_together: bool
    # Whether the recorder runs against a plain server (a third server, started for the A/B).
    # On two shared cores identical servers differ by up to ~9% over runs this short
    # (docs/validation/recorder-cost.md), so the CPU skips the A/B: its recorded runs still
    # feed the counter, call-order and client checks.
    recorder_ab: bool = True


# The recorder is measured on steady decode steps, where its per-step cost shows most.
RECORDER_WORKLOAD = "cpu-fixed-closed16"
# The two spreads of the reproduction: the widest of Anyscale's four, where the gaps are
# largest (predicted on an H100 at B = 64: continuous/static 2.1x and 2.5x).
GPU = CheckSizes(
    model="llama-3.1-8b",
    batch_size=64,
    mode_attempts=10,
    recorder_pairs=3,
    recorder_requests=384,
    repro_workloads=("anyscale-cap512", "anyscale-cap1536"),
    repro_requests=256,
    # Two 8B servers at 0.42 each fit an 80 GB card with ~13 GB of KV cache apiece.
    gpu_memory_share=0.42,
    start_together=False,
)
CPU = CheckSizes(
    model="tiny",
    batch_size=16,
    mode_attempts=10,
    recorder_pairs=3,
    recorder_requests=48,
    # One spread, the seed's fixed 100/200/300/1000: on two cores a step's cost grows nearly
    # with its batch, so the ordering is reported, not judged (harness.checks.rows.CPU_STEP_COST),
    # and one spread shows every system's path end to end.
    repro_workloads=("cpu-seed-100-200-300-1000",),
    repro_requests=32,
    gpu_memory_share=None,
    start_together=True,
    recorder_ab=False,
)
# The longest request of any check is 512 + 1536 tokens; Llama-3.1's own 131,072 would
# need 16 GiB of KV cache for one sequence, more than a shared card leaves each server.
MAX_MODEL_LEN = 4096


def server_args(sizes: CheckSizes) -> tuple[str, ...]:
    """vLLM arguments every server of the check gets."""
    args: tuple[str, ...] = ("--max-model-len", str(MAX_MODEL_LEN))
    if sizes.gpu_memory_share is not None:
        args += ("--gpu-memory-utilization", str(sizes.gpu_memory_share))
    return args


# The least each size may be: the recorder check needs three pairs for an interval.
MINIMUMS = {"batch_size": 1, "mode_attempts": 1, "recorder_pairs": 3, "recorder_requests": 1, "repro_requests": 1}
