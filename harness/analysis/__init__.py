"""Analysis of measured runs: pure functions over a run's loaded tables.

`metrics` turns one run's tables into its throughput and latency figures, `engine` does
the same from the engine's step log, `gap` lays runs side by side across spread levels,
each beside its prediction (harness.paper.simulate); `step_cost_fit` fits the step cost
(harness.paper.step_cost) on the engine's own steps and `step_predict` applies it per
server, each cell held out. `assess` is the one module that reads: it loads run
directories through harness.rundir and assesses them together. The names below are the
package's public surface; the modules' other names (thresholds, helpers) stay theirs.
"""
