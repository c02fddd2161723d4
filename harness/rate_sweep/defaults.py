"""The rate sweep's defaults, in a module that imports nothing: the CLI shows them in --help
without loading numpy and pandas (tests/harness/cli/test_startup.py)."""

# Rates as fractions of the continuous system's saturation rate (its burst's). Up to 1.4 because
# a burst's rate understates what continuous sustains under Poisson arrivals here: 200 prompts
# at once likely also load the API server, which shares the engine's core (docs/validation/rate-sweep.md).
DEFAULT_FRACTIONS = (0.3, 0.55, 0.75, 0.9, 1.05, 1.2, 1.4)
# Arrivals before this are the run's warm-up (the queue is still filling): left out of every figure.
WARMUP_S = 4.0
# A run shorter than ~20 s is noise on a 2-core machine: the report marks shorter ones.
TRUSTED_MEASURE_S = 20.0
# Arrivals measured per run.
MEASURE_S = TRUSTED_MEASURE_S
# Rates added past the grid's top while a system still holds there, each this factor above the last.
EXTRA_RATES = 2
EXTRA_RATE_FACTOR = 1.2
# Runs per system that halve the grid step around its held rate, then its knee.
REFINE_RUNS = 2
