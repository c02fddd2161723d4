"""Start, stop and failed start-up of a real vLLM server (an engine crash: tests/harness/cli/test_run_command.py).

What each path leaves in the temp dir, with a fake server: tests/launchers/test_server_temp_dir.py.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

from harness.errors import ServerError
from harness.settings import Settings
from launchers import ServerSpec, start
from launchers.server_files import INDUCTOR_CACHE_NAME

pytestmark = pytest.mark.server


@pytest.fixture
def temp_root(monkeypatch):
    """The system temp dir (`tempfile.gettempdir()`) for this test: private and empty, so anything new shows.

    A short path beside the real one: vLLM's socket paths under it must fit in 107 bytes.
    """
    root = Path(tempfile.mkdtemp(prefix="bbt-"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.ends_pooled_server("stops")
def test_stop_leaves_no_process_of_the_group(servers):
    server = servers.get("continuous", 4)
    pids = server.processes()
    # API server, engine core and at least one worker.
    assert len(pids) >= 3
    info = json.loads(server.info_path.read_text())
    assert info["argv"] == server.argv and info["mode"] == "continuous"
    assert info["vllm_version"] and info["ready_after_s"] is not None
    # vLLM's sockets and its workers' rendezvous file live in the server's own directory, gone with it.
    assert any(name.startswith("vllm_dist_") for name in os.listdir(server.temp_dir.path))
    servers.close()
    assert not server.alive()
    assert not server.temp_dir.path.exists()
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


@pytest.mark.ends_pooled_server("own_servers")
def test_a_start_and_stop_leave_nothing_in_the_temp_dir_and_compile_into_the_cache(servers, tmp_path, temp_root):
    servers.close()  # a start of its own, counted from an empty temp dir
    with start(ServerSpec(mode="static", model="tiny", max_num_seqs=2), log_dir=tmp_path / "server") as server:
        assert os.listdir(temp_root) == [server.temp_dir.path.name]
        inside = os.listdir(server.temp_dir.path)
        assert any(name.startswith("vllm_dist_") for name in inside), inside
    assert os.listdir(temp_root) == []
    # torch's compile cache (fx graphs, compiled kernels) is kept for the next start, under BATCHBENCH_CACHE (the suite
    # sets TORCHINDUCTOR_CACHE_DIR there too: tests/conftest.py). A few of torch's paths (precompiled headers, its
    # newer on-disk memo) always write under the temp dir's torchinductor_<user>: that went with the server's.
    assert (Settings.from_env().cache_dir / INDUCTOR_CACHE_NAME / "fxgraph").is_dir()


@pytest.mark.ends_pooled_server("own_servers")
def test_failed_start_up_quotes_the_log_and_leaves_nothing(servers, tmp_path, temp_root):
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
    assert os.listdir(temp_root) == []
