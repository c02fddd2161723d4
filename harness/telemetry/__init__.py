"""What the server and its machine report beside each run, sampled on the run's clocks.

`metrics` polls the server's Prometheus `/metrics` (requests running and waiting, KV-cache
use, vLLM's counters); `gpu` reads every local NVIDIA GPU through NVML (utilisation, memory,
power, energy) and writes the run's GPU table. Both stamp samples with `time.time()`, the
clock of the request records, take their clocks and transport injected so tests run on
simulated time, and hand their rows to harness.rundir's formats; nothing here reads a run.
"""
