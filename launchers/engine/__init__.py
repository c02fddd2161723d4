"""The code that runs inside vLLM's engine process: static admission, the step recorder, and what they read.

It imports nothing but vLLM, what vLLM itself requires (`packaging`) and the standard
library, and its modules import one another relatively, so it loads in any vLLM
environment, one that has never seen batchbench included: the launcher copies this
package, alone, into each server's own temp dir and puts only that on the engine's
PYTHONPATH (launchers.server.stage_engine_package). The harness imports
`vllm_releases` and `engine_env` from here too; neither imports vLLM. This file imports
nothing, so that loading a plugin does not load the harness.
"""
