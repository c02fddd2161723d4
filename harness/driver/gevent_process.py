"""A process that drives load: gevent-patched before anything opens a socket.

Locust's users run on gevent, which must patch the standard library (sockets, ssl,
threads, time) before those are imported. The `batchbench` commands that drive load
patch first thing (harness.cli.LOAD_COMMANDS); every other command, `import harness.cli`
and the offline library patch nothing. A script that calls a job driving load calls
`patch_for_load()` before its other imports.
"""

from __future__ import annotations

from harness.errors import UsageError


def patch_for_load() -> None:
    """Patch this process for gevent (idempotent); call before importing ssl, httpx or Locust."""
    from gevent import monkey

    monkey.patch_all()


def require_patched(what: str) -> None:
    """Refuse to drive load, naming `what`, in a process that was not patched first.

    Locust would patch on import, after ssl and sockets are in use: a half-patched
    process fails later, far from the cause.
    """
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        raise UsageError(f"{what} drives load with gevent: call harness.driver.gevent_process.patch_for_load()"
                         " before any other import (the batchbench commands do)")
