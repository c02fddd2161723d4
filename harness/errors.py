"""The harness's error types: the one place third-party failures become ours.

`UsageError` means the user asked for something that cannot be done as asked (bad
input): the CLI prints its one-line message and exits 2. `ServerError` means the
server under test misbehaved (failed to start, died): the CLI prints it and exits 1.
"""

from __future__ import annotations

# Ctrl-C or SIGTERM: the shell's code for SIGINT, the exit code of every interrupted command.
EXIT_INTERRUPTED = 130


class BatchBenchError(Exception):
    """Base class of every error the harness raises on purpose."""

    exit_code = 1


class UsageError(BatchBenchError):
    """Bad input from the user: one line, exit code 2, nothing half-written."""

    exit_code = 2


class ServerError(BatchBenchError):
    """The server under test failed to start, died, or answered nonsense."""

    exit_code = 1
