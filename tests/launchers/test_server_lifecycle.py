"""Start, stop and failed start-up of a real vLLM server (an engine crash: tests/harness/cli/test_run_command.py)."""

from __future__ import annotations

import json

import psutil
import pytest

from harness.errors import ServerError
from launchers import ServerSpec, start

pytestmark = pytest.mark.server


@pytest.mark.ends_pooled_server("stops")
def test_stop_leaves_no_process_of_the_group(servers):
    server = servers.get("continuous", 4)
    pids = server.processes()
    # API server, engine core and at least one worker.
    assert len(pids) >= 3
    info = json.loads(server.info_path.read_text())
    assert info["argv"] == server.argv and info["mode"] == "continuous"
    assert info["vllm_version"] and info["ready_after_s"] is not None
    # vLLM's sockets live in the server's own directory, gone with it.
    assert any(server.ipc_dir.iterdir())
    servers.close()
    assert not server.alive()
    assert not server.ipc_dir.exists()
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


@pytest.mark.ends_pooled_server("own_servers")
def test_failed_start_up_quotes_the_log_and_leaves_nothing(servers, tmp_path):
    servers.close()
    before = {p.pid for p in psutil.process_iter()}
    with pytest.raises(ServerError) as raised:
        spec = ServerSpec(mode="continuous", model="tiny", max_num_seqs=2, vllm_args=("--max-model-len", "999999"))
        start(spec, log_dir=tmp_path)
    message = str(raised.value)
    assert "last 40 lines of" in message and "max" in message.lower()
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and "vllm" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
