"""Pure analysis: predictions and back-of-envelope physics, no I/O.

`simulate` predicts each batching system's schedule and throughput from a calibrated
step-time model; `physics` derives a model's decode numbers (weights, KV cache,
compute/memory crossover) on a given GPU. `metrics` turns one run's tables into its
throughput and latency figures, `gap` lays runs side by side across spread levels;
`rundir` is the one I/O module, reading a finished run directory.
"""

__all__ = ["gap", "metrics", "physics", "rundir", "simulate"]
