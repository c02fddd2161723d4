"""The load driver: Locust users that stream requests and record every token.

Modules: `work` (plan -> work items), `dispatch` (who sends what when), `user` (the
Locust user), `journal` (crash-safe records), `sse` (stream decoding), `stream` (one
stream's tokens and verdict), `outcome` (failure kinds and the row of each request),
`timeouts`, `backends` (per kind of server: the length asked for, the count, the endpoints),
`endpoint` (checks, token counts, warm-up), `client_health`, `steps` (the
engine's step log), `load` (the live load and its stopping), `tables` (a run's tables),
`runner` (one run), `http_client` (the users' shared client), `interrupts` (Ctrl-C and
SIGTERM unwind the main greenlet). Distributed runs (`--workers`) are in `distributed`.
Nothing is re-exported here on purpose: importing `user`, `load`, `tables`, `runner`,
`distributed.cluster` or `distributed.worker` imports Locust, which monkey-patches the
whole process for gevent; only a process that drives load, patched first
(`gevent_process.patch_for_load`, as the `batchbench` load commands do), should do that.
"""
