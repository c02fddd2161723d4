"""The latency half of the experiment: Poisson arrivals at a grid of rates, per system.

Anyscale's latency runs send requests as a Poisson process and read median and tail
latency per system. A rate sweep first measures each system's saturation throughput with
a burst, then runs every system at rates set relative to the continuous system's
saturation (harness.rate_sweep.grid), interleaved as `reproduce` interleaves its runs.
Each run becomes one point (harness.rate_sweep.point): client latencies, the engine's
queue wait per request, and whether the system kept up. The points per system form a
curve (harness.rate_sweep.curve): its knee and the highest rate it holds under an SLO.
"""
