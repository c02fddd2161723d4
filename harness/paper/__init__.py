"""Predictions on paper: batching schedules and step costs from a model, not from a run.

`simulate` predicts each batching system's schedule and throughput from a step cost
(`step_cost`: the interface, and the linear step cost harness.analysis.step_cost_fit fits
on engine steps); `physics` derives a model's decode numbers (weights, KV cache,
compute/memory crossover) on a given GPU from the published shapes in `model_configs`,
which the launchers also write into model directories; `gpu_cost`, `gpu_schedule`,
`gpu_setups` and `gpu_predict` predict a GPU engine's throughput (step cost from the
hardware card, a block-level vLLM schedule, sourced constants). Pure, no I/O; nothing
here reads a measured run. Nothing is re-exported: import the module you need.
"""
