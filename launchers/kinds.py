"""The kinds of server the harness launches: one module each, behind one small interface.

A kind names the server modes it starts (the values of harness.systems.SERVER_MODE), the
driver backend its requests go through (harness.driver.backends, by name: the driver sits
beside this package, not under it), whether it writes an engine step log, and how a
ServerConfig becomes a started server in one of its modes. Jobs, suites and sweeps reach a
server only through `launch` (harness.sweep.servers.run_targets); a third kind is one new
module and one entry in KINDS.

- vllm (launchers.server): vLLM in continuous or forced static mode, from the environment
  `ServerConfig.server_python` names, with the static scheduler and the step log.
- transformers (launchers.transformers_server): Hugging Face's `transformers serve`, with its
  own continuous batching or one request at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from harness.systems import HfMode, Mode, ServerMode
from launchers.handle import ServerProcess
from launchers.server import start
from launchers.spec import ServerConfig, ServerSpec
from launchers.transformers_server import TransformersSpec, start_transformers


@dataclass(frozen=True)
class ServerKind:
    """One kind of server: its modes, how runs talk to it, and how it is started."""

    name: str
    # How logs and errors name it.
    label: str
    modes: tuple[ServerMode, ...]
    # harness.driver.backends.BACKENDS key: how requests force their length and tokens are counted.
    backend: str
    # It writes an engine step log (what probes, budgets and "measured at the engine" read).
    records_steps: bool
    # Starts `config`'s server in a mode of this kind, logging under the directory given; waits until it serves.
    launch: Callable[[ServerConfig, ServerMode, Path], ServerProcess]


def _launch_vllm(config: ServerConfig, mode: ServerMode, log_dir: Path) -> ServerProcess:
    return start(ServerSpec.of(config, cast(Mode, mode)), log_dir=log_dir)


def _launch_transformers(config: ServerConfig, mode: ServerMode, log_dir: Path) -> ServerProcess:
    spec = TransformersSpec(mode=cast(HfMode, mode), model=config.model, host=config.host,
                            startup_timeout_s=config.startup_timeout_s, server_python=config.server_python)
    return start_transformers(spec, log_dir=log_dir)


VLLM_KIND = ServerKind("vllm", "vLLM", ("continuous", "static"), "vllm", True, _launch_vllm)
TRANSFORMERS_KIND = ServerKind("transformers", "`transformers serve`", ("hf-continuous", "hf-sequential"),
                               "transformers", False, _launch_transformers)
KINDS: dict[str, ServerKind] = {kind.name: kind for kind in (VLLM_KIND, TRANSFORMERS_KIND)}


def kind_of(mode: ServerMode) -> ServerKind:
    """The kind of server that runs in `mode`."""
    return next(kind for kind in KINDS.values() if mode in kind.modes)


def launch_help() -> str:
    """Every mode a server can be launched in, by kind: for a command's help."""
    return "; ".join(f"{kind.label} {', '.join(kind.modes)}" for kind in KINDS.values())
