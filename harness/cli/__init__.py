"""`batchbench` command line: each command parses its flags, calls a job, and exits with its result.

The commands that drive load (LOAD_COMMANDS) patch the process for gevent before
anything else is imported; every other command, and importing this package, patches
nothing. The parser is in `harness.cli.commands`, one module per subcommand beside it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Commands whose process runs Locust's users (gevent): the load commands and the jobs made of runs.
LOAD_COMMANDS = frozenset({"run", "worker", "reproduce", "sweep-rates", "compare", "nightly", "gpu-check"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `batchbench` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if _command_of(arguments) in LOAD_COMMANDS:
        from harness.driver.gevent_process import patch_for_load

        patch_for_load()
    # Ctrl-C and SIGTERM (kill, a CI timeout) unwind the command, so launched servers are
    # stopped and records kept.
    from harness.driver.interrupts import interrupt_main_on_signals

    interrupt_main_on_signals()
    from harness.cli.commands import dispatch

    return dispatch(arguments)


def _command_of(arguments: list[str]) -> str | None:
    """The subcommand named in `arguments`: the top-level parser takes no option but --help."""
    return next((argument for argument in arguments if not argument.startswith("-")), None)
