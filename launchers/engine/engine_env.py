"""Environment variables the launcher sets for the plugins it loads into vLLM's engine.

Kept free of vLLM imports: the launcher (which must start without vLLM installed, to
say so in one line) and the plugins (which run inside the engine) both read them here.
"""

# Static mode: how long to wait for a full batch (launchers.engine.static_scheduler).
BATCH_WAIT_ENV = "BATCHBENCH_STATIC_BATCH_WAIT_S"
# Where the engine appends one line per step (launchers.engine.step_recorder).
STEP_LOG_ENV = "BATCHBENCH_STEP_LOG"
