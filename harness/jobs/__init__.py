"""Jobs: what the commands do, as a library a script can call without the command line.

A job is one typed config (a pydantic model: each setting's default, range and help, from
which the command's flags are generated: harness.cli.flags) and one function that takes
it and the servers to run on, runs, and returns what happened; the CLI parses flags into
the config, calls the function and maps its result to an exit code. What every job
shares, where its output goes and how a report written before its end is labelled, is in
`harness.jobs.stages`; the checked kinds of settings (writable paths, addresses, counts)
in `harness.jobs.fields`; who a job runs against, launched or attached, in
`harness.sweep.servers.run_targets` (from `launchers.ServerConfig` and `launchers.Endpoints`).

- `run`: one workload against one server, into a run directory.
- `reproduce`: the continuous vs static vs naive sweep and its report.
- `rate_sweep`: latency against offered rate per system, its knees and held rates.
- `night`: a suite's runs, gated against the last accepted nights and trended.
- `gpu_check`: the installation checked on this machine's real engine, one verdict.

Importing a job imports no load driver and patches nothing. The jobs that drive load
refuse to start in a process gevent has not patched: a script calls
`harness.driver.gevent_process.patch_for_load()` before its other imports.
"""
