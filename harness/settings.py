"""The environment variables batchbench reads, read here and nowhere else.

- `BATCHBENCH_CACHE` -> `Settings.cache_dir`: where made model directories live
  (launchers.models) and launched servers' torch compile cache (launchers.server_files);
  default `~/.cache/batchbench`.
- `BATCHBENCH_SERVER_PYTHON` -> `Settings.server_python`: the interpreter a launched vLLM
  server runs with; default this Python.
- `PYTHONPATH` -> `Settings.pythonpath`: kept behind the project root on a launched
  server's path.
- `BATCHBENCH_HISTORY` -> `Settings.history_path`: the results history (harness.history);
  default `DEFAULT_HISTORY_PATH`; `--history` overrides it.
- `GITHUB_STEP_SUMMARY` -> `Settings.step_summary`: set by GitHub Actions; the gate
  appends its Markdown verdict there.
- the variable named by `run --api-key-env` -> `Settings.variable(name)`: the bearer token.

A launched server inherits the whole environment (`Settings.environ`) with the launcher's
overrides on top. Two variables are not read here: the ones the launcher sets for the
plugins inside vLLM's engine process (launchers.engine.engine_env), which only that process reads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

CACHE_ENV = "BATCHBENCH_CACHE"
SERVER_PYTHON_ENV = "BATCHBENCH_SERVER_PYTHON"
HISTORY_ENV = "BATCHBENCH_HISTORY"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
DEFAULT_HISTORY_PATH = Path("~/.local/share/batchbench/history.sqlite")
# How --history's help names its default.
HISTORY_DEFAULT_HELP = f"${HISTORY_ENV}, else {DEFAULT_HISTORY_PATH}"


@dataclass(frozen=True)
class Settings:
    """The settings the environment gives; build with `from_env`."""

    cache_dir: Path
    server_python: str
    pythonpath: str | None
    history_path: Path
    step_summary: Path | None
    # The environment as read: what a launched server inherits. Kept out of repr, since it
    # may hold secrets (an API key).
    environ: Mapping[str, str] = field(repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from `environ` (default: this process's environment), as of now."""
        env = MappingProxyType(dict(os.environ if environ is None else environ))
        return cls(
            cache_dir=Path(env.get(CACHE_ENV, Path.home() / ".cache" / "batchbench")),
            server_python=env.get(SERVER_PYTHON_ENV, sys.executable),
            pythonpath=env.get("PYTHONPATH"),
            # An empty value is unset, as shells and CI files often leave it.
            history_path=Path(env.get(HISTORY_ENV) or DEFAULT_HISTORY_PATH).expanduser(),
            step_summary=Path(env[STEP_SUMMARY_ENV]) if env.get(STEP_SUMMARY_ENV) else None,
            environ=env,
        )

    def variable(self, name: str) -> str | None:
        """A variable the user named on the command line (`--api-key-env`); None if unset."""
        return self.environ.get(name)


def export(overrides: Mapping[str, str]) -> None:
    """Set `overrides` in this process's environment, for what it imports and starts from now on.

    For settings a library reads once from the environment (torch's compile cache), written
    here as every environment variable is read here.
    """
    os.environ.update(overrides)
