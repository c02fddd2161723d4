"""batchbench: measure, explain and guard the continuous-vs-static batching gap.

Stages, each its own package: `harness.workload` (specs and plans), `harness.driver`
(Locust load and recording), `harness.rundir` (the run directory's format),
`harness.analysis` (metrics, fitted predictions, gap table), `harness.report`; beside
them `harness.paper` (predictions on paper); servers come from the top-level `launchers`
package.
"""

from harness.errors import BatchBenchError, ServerError, UsageError

__all__ = ["BatchBenchError", "ServerError", "UsageError"]
