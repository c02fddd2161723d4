"""Run `execute` against a server that takes connections and never answers; print what is left.

Importing the runner imports Locust, which patches the whole process for gevent, so the
tests run this script in a process of its own:

    python runner_scenario.py error|interrupt OUT_DIR

`error`: the wait for the run fails with an unexpected exception while requests are in
flight. `interrupt`: Ctrl-C lands (as the CLI delivers it, into the main greenlet) while
requests are in flight. Prints one JSON object: what `execute` raised, and what of the
live load still runs. The run's progress lines go to stderr, as in the CLI.
"""

from __future__ import annotations

import contextlib
import gc
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import gevent
import greenlet

from harness.cli.progress import show_progress
from harness.driver import runner
from harness.driver.endpoint import EndpointInfo
from harness.driver.load import LiveLoad
from harness.workload import RequestPlan, TokenizerLike, WorkloadSpec

SPEC = {
    "name": "in-flight",
    "seed": 7,
    "num_requests": 12,
    "prompt_tokens": {"kind": "fixed", "value": 16},
    "output_tokens": {"kind": "fixed", "value": 8},
    "arrival": {"kind": "burst"},
    "endpoint": "chat",
}
# Fewer users than requests: some requests are in flight when the run ends, the rest unsent.
USERS = 4


def still_running(besides: list[gevent.Greenlet]) -> list[str]:
    """Every gevent greenlet (users, Locust's, ours, the telemetry thread) that has not ended.

    gevent's own thread-pool workers (DNS) are not gevent.Greenlets, and not the run's.
    """
    return [
        repr(g) for g in gc.get_objects() if isinstance(g, gevent.Greenlet) and not g.dead and g not in besides
    ]


def same_prompt(plan: RequestPlan, tokenizer: TokenizerLike, verify: Callable[[str], int] | None = None) -> list[str]:
    """Prompts without a tokenizer (not under test here)."""
    return ["hello"] * len(plan.requests)


def main(scenario: str, out_dir: Path) -> None:
    show_progress()  # as the CLI does: the run's progress lines on stderr
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections complete in the kernel's backlog; no answer ever comes
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"

    loads: list[LiveLoad] = []
    start_load = runner._start_load

    def recording_start(
        request: runner.RunRequest, run: runner._PreparedRun, users: int, stack: contextlib.ExitStack
    ) -> LiveLoad:
        loads.append(start_load(request, run, users, stack))
        return loads[-1]

    real_wait = runner._wait
    # Suspended for good once it has thrown into the main greenlet (as the CLI's signal handler).
    interrupter: list[gevent.Greenlet] = []

    def in_flight() -> None:
        """Return once every user has sent its request (none will be answered)."""
        while loads[0].context.sent < USERS:
            gevent.sleep(0.01)

    def failing_wait(dispatcher: runner.WorkSource) -> bool:
        in_flight()
        raise RuntimeError("an unexpected error")

    def interrupted_wait(dispatcher: runner.WorkSource) -> bool:
        main_greenlet = greenlet.getcurrent()

        def interrupt() -> None:
            in_flight()
            main_greenlet.throw(KeyboardInterrupt)

        interrupter.append(gevent.spawn(interrupt))
        return real_wait(dispatcher)

    runner._start_load = recording_start
    runner._wait = failing_wait if scenario == "error" else interrupted_wait
    runner.make_prompts = same_prompt
    request = runner.RunRequest(
        spec=WorkloadSpec.model_validate(SPEC),
        system="continuous",
        batch_size=4,
        endpoint=EndpointInfo(url, "tiny", None, None),
        tokenizer=None,
        out_dir=out_dir,
        warmup=False,
        max_users=USERS,
    )
    raised = None
    try:
        runner.execute(request)
    except BaseException as exc:  # noqa: BLE001 - what it raised is the observation
        raised = type(exc).__name__
    load = loads[0]
    print(
        json.dumps(
            {
                "raised": raised,
                "client_closed": load.context.client.is_closed,
                "runner_state": load.runner.state if load.runner else None,
                "monitor_stopped": load.health is not None,
                "still_running": still_running(besides=interrupter),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
