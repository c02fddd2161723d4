"""Pure analysis: predictions and back-of-envelope physics, no I/O.

`simulate` predicts each batching system's schedule and throughput from a step-cost
model (`step_cost`), fitted on the engine's own steps by `step_fit` and applied per
server, each cell held out, by `step_predict`; `physics` derives a model's decode
numbers (weights, KV cache, compute/memory crossover) on a given GPU. `metrics` turns
one run's tables into its throughput and latency figures, `engine` does the same from
the engine's step log, `gap` lays runs side by side across spread levels; `rundir` is
the one I/O module, reading a finished run directory.
"""

__all__ = ["engine", "gap", "metrics", "physics", "rundir", "simulate", "step_cost", "step_fit", "step_predict"]
