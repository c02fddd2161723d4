"""What every job shares: where its report goes, and how Ctrl-C ends its loop but not the job.

A job writes its report as it goes (PRELIMINARY), and on Ctrl-C it stops its runs, stops
its servers, and still reports what finished (STOPPED); with nothing finished it writes no
report. The command then exits EXIT_INTERRUPTED (harness.errors).
"""

from __future__ import annotations

import contextlib
import logging
import platform
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

logger = logging.getLogger(__name__)


def default_out(prefix: str = "") -> Path:
    """`reports/<prefix><date>-<host>`: where a job's report goes unless it is told."""
    return Path("reports") / f"{prefix}{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"


@dataclass
class Interruption:
    """Whether Ctrl-C ended a job's loop, and what the job says of it then."""

    stopped: str | None = None

    @contextlib.contextmanager
    def catch(self, describe: Callable[[], str]) -> Iterator[None]:
        """Run the job's loop; on Ctrl-C note `describe()` (e.g. "stopped by Ctrl-C after 3 of 12 runs") and go on."""
        try:
            yield
        except KeyboardInterrupt:
            self.stopped = describe()
            logger.info(f"{self.stopped}: writing the report of the finished runs")
