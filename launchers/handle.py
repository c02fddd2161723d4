"""The lifecycle every launched server shares: alive, ready, dead with its log quoted, stopped.

A kind of server (vLLM, `transformers serve`) subclasses `ServerProcess` with its own
readiness check and its own record (a dataclass written as server.json beside the log).
Each server owns a temp directory (launchers.server_files), removed when it stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx

from harness.errors import ServerError
from launchers.process import spawn, stop_process, tail
from launchers.server_files import ServerTempDir

logger = logging.getLogger(__name__)


class ServerProcess:
    """A started server process and its log. Use as a context manager, or call `stop()`.

    `kind` names the server in messages ("vLLM", "transformers serve"); `info` is the
    server's record, a dataclass with at least `mode`, `base_url` and `ready_after_s`;
    `temp_dir` is the server's TMPDIR.
    """

    kind = "server"

    def __init__(
        self,
        process: subprocess.Popen,
        info: Any,
        log_path: Path,
        temp_dir: ServerTempDir,
        startup_timeout_s: float,
        stop_grace_s: float,
    ) -> None:
        self.process = process
        self.info = info
        self.log_path = log_path
        self.temp_dir = temp_dir
        self.info_path = log_path.with_name("server.json")
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s

    @property
    def base_url(self) -> str:
        return self.info.base_url

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def argv(self) -> list[str]:
        return self.info.argv

    @property
    def served_model(self) -> str:
        return self.info.model

    def alive(self) -> bool:
        """True while the server's main process runs."""
        return self.process.poll() is None

    def check(self) -> None:
        """Raise ServerError, quoting the log, if the server has died."""
        code = self.process.poll()
        if code is not None:
            raise ServerError(self.death_message(f"{self.kind} server exited with code {code}"))

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL after the grace period, remove the temp dir; idempotent."""
        try:
            stop_process(self.process, self.stop_grace_s)
        finally:
            # After the group is gone (or SIGKILLed by a second Ctrl-C): nothing is left to write there.
            self.temp_dir.remove()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def ready(self, client: httpx.Client) -> bool:
        """Whether the server answers requests now; each kind says how it is asked."""
        raise NotImplementedError

    def wait_ready(self) -> None:
        """Block until `ready`; raise ServerError (the server stopped) on death or timeout."""
        started = time.monotonic()
        last_note = started
        label = f"{self.kind} ({self.info.mode})"
        with httpx.Client(base_url=self.base_url, timeout=5.0) as client:
            while True:
                self.check()
                if self.ready(client):
                    self.info.ready_after_s = round(time.monotonic() - started, 2)
                    logger.info(f"{label} ready at {self.base_url} after {self.info.ready_after_s:.0f} s")
                    return
                elapsed = time.monotonic() - started
                if elapsed > self.startup_timeout_s:
                    self.stop()
                    limit = f"{self.startup_timeout_s:.0f} s"
                    raise ServerError(self.death_message(f"{self.kind} did not become ready within {limit}"))
                if time.monotonic() - last_note >= 10:
                    logger.info(f"waiting for {label} to start: {elapsed:.0f} s (log: {self.log_path})")
                    last_note = time.monotonic()
                time.sleep(0.5)

    def death_message(self, headline: str) -> str:
        """`headline` and the last 40 lines of the server's log."""
        return f"{headline}; last 40 lines of {self.log_path}:\n{tail(self.log_path, 40)}"

    def write_info(self) -> None:
        self.info_path.write_text(json.dumps(asdict(self.info), indent=2))


Handle = TypeVar("Handle", bound=ServerProcess)


def launch(
    command: Callable[[Path], tuple[list[str], dict[str, str]]],
    environ: Mapping[str, str],
    log_path: Path,
    handle_of: Callable[[subprocess.Popen, list[str], dict[str, str], ServerTempDir], Handle],
    *,
    grace_s: float,
    socket_name_len: int = 0,
    settle: Callable[[Handle], None] | None = None,
) -> Handle:
    """Spawn a server in a temp dir of its own (its working directory too) and wait until it serves; its handle.

    `command(temp_dir)` gives its argv and the environment it adds to `environ`;
    `handle_of(process, argv, env_overrides, temp_dir)` makes its handle; `settle(handle)`
    runs once it serves, before its record is written the second time. If anything fails
    before it serves (Ctrl-C and SIGTERM included), the process group is stopped and the
    temp dir removed: nothing is left behind.
    """
    with contextlib.ExitStack() as on_failure:
        temp_dir = on_failure.enter_context(ServerTempDir(socket_name_len))
        argv, env_overrides = command(temp_dir.path)
        process = spawn(argv, {**environ, **env_overrides}, log_path, temp_dir.path)
        on_failure.callback(stop_process, process, grace_s)
        handle = handle_of(process, argv, env_overrides, temp_dir)
        handle.write_info()
        handle.wait_ready()
        if settle is not None:
            settle(handle)
        handle.write_info()
        # It serves: from now on its stop() stops it and removes its temp dir.
        on_failure.pop_all()
        return handle
