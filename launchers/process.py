"""Operating-system plumbing for server processes: ports, process groups, log tails."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import psutil

from harness.errors import UsageError


def free_port(host: str) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def chosen_port(host: str, port: int | None) -> int:
    """`port`, checked free (UsageError when it is not), or a free port when None."""
    if port is None:
        return free_port(host)
    ensure_port_free(host, port)
    return port


def ensure_port_free(host: str, port: int) -> None:
    """Raise UsageError if `port` on `host` cannot be bound (busy, or not ours to bind)."""
    if not 0 < port < 65536:
        raise UsageError(f"port must be between 1 and 65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise UsageError(f"port {port} on {host} is already in use ({exc.strerror})") from exc


def spawn(argv: list[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> subprocess.Popen:
    """Start a server as a process group of its own (stopped as one), in `cwd`, its output appended to `log_path`.

    `python -m` puts its working directory first on the path: a server started in the caller's
    directory (a vLLM source checkout, this project) would import from there.
    """
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd,
            start_new_session=True,
        )


def stop_process(process: subprocess.Popen, grace_s: float) -> None:
    """Stop `process`'s whole group (`stop_group`) and reap it; idempotent."""
    stop_group(process.pid, grace_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of a process group (zombies excluded: they hold nothing)."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def stop_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM a whole process group, SIGKILL what is left after `grace_s`.

    Returns True if SIGKILL was needed. A Ctrl-C or SIGTERM that lands while it waits (a
    second one: the first is usually why the group is being stopped) ends the wait at once
    with SIGKILL, then goes on: the group is never left running.
    """
    members = group_members(pgid)
    if not _signal_group(pgid, signal.SIGTERM):
        return False
    try:
        _, alive = psutil.wait_procs(members, timeout=grace_s)
    except KeyboardInterrupt:
        _signal_group(pgid, signal.SIGKILL)
        raise
    # A member started after the snapshot was signalled with the group too.
    if not alive and not group_members(pgid):
        return False
    _signal_group(pgid, signal.SIGKILL)
    psutil.wait_procs(group_members(pgid), timeout=10)
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a text file ('' if it does not exist)."""
    try:
        with path.open(errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except FileNotFoundError:
        return ""
