"""Pure analysis: predictions and back-of-envelope physics, no I/O.

`simulate` predicts each batching system's schedule and throughput from a calibrated
step-time model; `physics` derives a model's decode numbers (weights, KV cache,
compute/memory crossover) on a given GPU.
"""

__all__ = ["physics", "simulate"]
