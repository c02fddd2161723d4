"""Jobs: what the long commands do, as a library a script can call without the command line.

A job takes typed settings (each module's dataclass, with its defaults beside it) and the
servers to run on, runs, and returns what happened; the CLI parses flags into those
settings, calls the job and maps its result to an exit code (harness.cli). What every job
shares, where its output goes and how a report written before its end is labelled, is in
`harness.jobs.stages`; who a job runs against, launched or attached, in
`harness.sweep.servers.run_targets` (from `launchers.ServerConfig` and `launchers.Endpoints`).

- `reproduce`: the continuous vs static vs naive sweep and its report.
- `rate_sweep`: latency against offered rate per system, its knees and held rates.

Importing a job imports no load driver: the modules that drive load (harness.sweep,
harness.driver) are imported when a job runs.
"""
