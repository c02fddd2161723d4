"""Where the progress lines go: stderr, one line each, flushed as it is written.

The harness and the launchers log their progress (starting a server, building
prompts, requests done) at INFO on their module loggers; this is the one place that
shows them. Other libraries' loggers (Locust's, httpx's) are left as they are.
"""

from __future__ import annotations

import logging
import sys

PROGRESS_LOGGERS = ("harness", "launchers")


class StderrLines(logging.Handler):
    """Each record's message as one line on the current `sys.stderr`, flushed at once."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # The stream is looked up per line, not kept: tests swap sys.stderr.
            print(self.format(record), file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise
            self.handleError(record)


def show_progress() -> None:
    """Print the INFO (and louder) lines of the harness and launchers on stderr; idempotent."""
    for name in PROGRESS_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not any(isinstance(handler, StderrLines) for handler in logger.handlers):
            logger.addHandler(StderrLines())
