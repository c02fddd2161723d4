"""A worker waiting for its master: it retries on the clock it is given and gives up at its timeout.

On simulated time, so the retries asserted are exact. In a process of its own:
importing harness.driver.distributed.worker imports Locust, which patches the process for gevent.
"""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, socket
from harness.driver.distributed.worker import wait_for_master
from harness.errors import UsageError

class SteppedTime:
    def __init__(self):
        self.now, self.slept = 1000.0, []
    def __call__(self):
        return self.now
    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds

def attempt(port):
    time_ = SteppedTime()
    try:
        wait_for_master("127.0.0.1", port, 1.0, clock=time_, sleep=time_.sleep)
    except UsageError as exc:
        return {"port": port, "slept": time_.slept, "error": str(exc)}
    return {"port": port, "slept": time_.slept, "error": None}

with socket.socket() as closed:
    closed.bind(("127.0.0.1", 0))
    nobody = closed.getsockname()[1]  # closed again: nothing listens there
with socket.create_server(("127.0.0.1", 0)) as master:
    print(json.dumps({"nobody": attempt(nobody), "listening": attempt(master.getsockname()[1])}))
"""


def attempts() -> dict[str, dict]:
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_a_worker_retries_twice_a_second_then_gives_up_with_one_line():
    results = attempts()
    nobody = results["nobody"]
    # Tries at 0, 0.5 and 1.0 s: the last is at the timeout, so it gives up there.
    assert nobody["slept"] == [0.5, 0.5]
    assert nobody["error"].startswith(f"--master 127.0.0.1:{nobody['port']}: no master answered within 1 s (")
    assert "\n" not in nobody["error"]
    listening = results["listening"]
    assert listening == {"port": listening["port"], "slept": [], "error": None}
