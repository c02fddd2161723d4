"""Nightly runs: a suite of workloads x systems x repetitions, appended to the history and gated."""

from harness.nightly.suite import GatePolicy, LoadedSuite, Suite, list_builtin_suites, load_suite

__all__ = ["GatePolicy", "LoadedSuite", "Suite", "list_builtin_suites", "load_suite"]
