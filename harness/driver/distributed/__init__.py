"""Load from several worker processes (`--workers`, `batchbench worker`): one master, N workers.

`shard` (who sends what), `wire` (master-worker messages), `clock` (worker clock
offsets), `remote` (closed loops and waves handed out by the master), `cluster` (the
master), `worker` (a worker process). The single-process parts they share (work items,
dispatch, the Locust user, the journal, the tables) stay in harness.driver.
Nothing is re-exported: `cluster` and `worker` import Locust (see harness.driver).
"""
