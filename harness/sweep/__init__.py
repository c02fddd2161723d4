"""Sweeps of many runs, and the servers a job runs on: what the jobs, the nightly suites and
`gpu-check` share to make their runs.

`servers` turns a job's server settings and given endpoints into its targets, launching the
servers not given (stopped when the job's exit stack closes); `runs` makes each
(system, workload, server) cell's runs in turn, repetitions interleaved across servers.
Both drive load: the load driver gevent-patches the process that imports them, so jobs
import them inside the functions that run.
"""
