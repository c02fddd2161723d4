"""The load users' shared HTTP client, and the open files a process of users needs.

Used by a single-process run and by each worker of a distributed run alike.
"""

from __future__ import annotations

import resource

import httpx

from harness.driver.llhttp_transport import LlhttpTransport
from harness.driver.timeouts import CONNECT_TIMEOUT_S, Timeouts
from harness.errors import UsageError

# Sockets beyond the users' own: telemetry, the step log, parquet files, Locust's own.
_SPARE_FILES = 256


def allow_open_files(users: int) -> None:
    """Raise this process's open-file limit to hold one socket per user, or say why not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = users + _SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise UsageError(f"{users} concurrent users need {needed} open files, but the hard limit is {hard}:"
                             " lower --max-users or raise `ulimit -Hn`")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def load_client(base_url: str, headers: dict[str, str], timeouts: Timeouts, users: int) -> httpx.Client:
    """The one HTTP client every load user of a process shares, with a connection for each.

    Its transport parses HTTP in C (harness.driver.llhttp_transport): the default one cost
    more per streamed token than everything the harness records.
    """
    return httpx.Client(
        base_url=base_url,
        headers=headers,
        # The read timeout bounds the wait for a first byte; the users bound later pauses.
        timeout=httpx.Timeout(timeouts.first_byte_s, connect=min(CONNECT_TIMEOUT_S, timeouts.first_byte_s)),
        transport=LlhttpTransport(max_keepalive=users + 8),
    )
