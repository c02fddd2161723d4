"""Settings come from the environment in one place (harness.settings), and only there."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from harness.driver.endpoint import EndpointInfo, load_tokenizer
from harness.settings import HISTORY_ENV, STEP_SUMMARY_ENV, Settings
from launchers import resolve_model
from launchers.models import cache_root

ROOT = Path(__file__).resolve().parents[2]
# The engine plugins run inside vLLM's process and read what the launcher set for them
# (launchers.engine.engine_env).
READERS_ALLOWED = {"harness/settings.py", "launchers/engine/static_scheduler.py", "launchers/engine/step_recorder.py"}


def test_defaults_from_an_empty_environment():
    settings = Settings.from_env({})
    assert settings.cache_dir == Path.home() / ".cache" / "batchbench"
    assert settings.server_python == sys.executable
    assert settings.pythonpath is None
    assert settings.variable("BB_TEST_KEY") is None


def test_values_from_the_environment():
    environ = {
        "BATCHBENCH_CACHE": "/srv/cache",
        "BATCHBENCH_SERVER_PYTHON": "/opt/vllm/bin/python",
        "PYTHONPATH": "/extra",
        "BB_TEST_KEY": "secret",
    }
    settings = Settings.from_env(environ)
    assert settings.cache_dir == Path("/srv/cache")
    assert settings.server_python == "/opt/vllm/bin/python"
    assert settings.pythonpath == "/extra"
    assert settings.variable("BB_TEST_KEY") == "secret"
    # A key in the environment must not end up in a log line or a traceback.
    assert "secret" not in repr(settings)


def test_settings_are_a_snapshot():
    environ = {"BATCHBENCH_CACHE": "/a"}
    settings = Settings.from_env(environ)
    environ["BATCHBENCH_CACHE"] = "/b"
    assert settings.cache_dir == Path("/a") and settings.environ["BATCHBENCH_CACHE"] == "/a"


def test_model_cache_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("BATCHBENCH_CACHE", str(tmp_path))
    assert cache_root() == tmp_path


def test_loading_a_tokenizer_does_not_switch_the_whole_process_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    directory = resolve_model("tiny").path
    tokenizer = load_tokenizer(None, EndpointInfo("http://127.0.0.1:1", "tiny", directory, None))
    assert len(tokenizer.encode("hello world")) == 2
    # Set process-wide, a server launched after this would inherit it (reproduce starts two).
    assert "HF_HUB_OFFLINE" not in os.environ


def test_only_the_settings_module_reads_the_environment():
    readers = set()
    for folder in ("harness", "launchers"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ("environ", "getenv", "environb")
                    and getattr(node.value, "id", "") == "os"
                ):
                    readers.add(str(path.relative_to(ROOT)))
    assert readers <= READERS_ALLOWED and "harness/settings.py" in readers


def test_the_history_lives_where_the_environment_says_else_under_home():
    assert Settings.from_env({HISTORY_ENV: "/data/bb.sqlite"}).history_path == Path("/data/bb.sqlite")
    assert Settings.from_env({}).history_path == Path.home() / ".local/share/batchbench/history.sqlite"
    assert Settings.from_env({HISTORY_ENV: ""}).history_path == Settings.from_env({}).history_path


def test_the_github_step_summary_is_a_path_when_set():
    assert Settings.from_env({STEP_SUMMARY_ENV: "/gh/summary.md"}).step_summary == Path("/gh/summary.md")
    assert Settings.from_env({}).step_summary is None
