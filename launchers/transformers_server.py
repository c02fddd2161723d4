"""Start and stop Hugging Face's `transformers serve` in its two modes.

- `hf-continuous`: `--continuous-batching`, its own iteration-level scheduler over a
  paged KV cache. It has no cap on sequences per step: a step holds what its token
  budget (`--cb-max-batch-tokens`: 8,192 by transformers' default, 512 from this launcher
  on a CPU) and its cache allow.
- `hf-sequential`: one `model.generate()` at a time; requests wait their turn.

The server is pinned to one model (its FORCE_MODEL argument) and refuses requests
naming another; its `/v1/models` lists the Hugging Face hub cache, not that model, so
readiness is its `/health` alone (which also says whether the batching worker lives).
It loads real weights: a profile made for `--load-format dummy` cannot be served.
"""

from __future__ import annotations

import logging
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import psutil
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from harness.errors import UsageError
from harness.settings import Settings
from harness.systems import HfMode
from harness.workload.limits import Seconds
from launchers.handle import ServerProcess, launch
from launchers.models import ResolvedModel, parse_profile_argument, resolve_model
from launchers.process import chosen_port
from launchers.server_files import ServerTempDir, compile_cache_env, temp_env
from launchers.spec import as_usage_error

logger = logging.getLogger(__name__)
SERVER_NAME = "transformers serve"
# On a CPU, transformers sizes the paged cache and its attention masks from 90% of the
# machine's whole memory unless told, which leaves nothing for a vLLM server beside it.
# 2 GiB holds the tiny model's cache for these bursts (docs/validation/transformers-serve.md).
DEFAULT_CPU_CACHE_BYTES = 2 << 30
# On a CPU each step's attention mask spans its token budget by the whole cache, so
# transformers' default budget of 8,192 tokens makes every step slow enough to stall a
# burst (docs/validation/transformers-serve.md).
CPU_MAX_BATCH_TOKENS = 512
# Present where an NVIDIA driver is loaded: transformers then caches on the GPU.
NVIDIA_CONTROL_DEVICE = "/dev/nvidiactl"
# Its health and completions routes; nothing else it has is read (launchers docstring).
HEALTH_PATH = "/health"
# Prints transformers' version, or exits 3 naming what its serving extras lack.
_PROBE_SERVING = (
    "import importlib.metadata as m, sys\n"
    "def has(d):\n"
    "    try: return bool(m.version(d))\n"
    "    except m.PackageNotFoundError: return False\n"
    "missing = [d for d in ('transformers', 'accelerate', 'fastapi', 'uvicorn') if not has(d)]\n"
    "if missing: print(', '.join(missing)); sys.exit(3)\n"
    "print(m.version('transformers'))\n"
)


class TransformersSpec(BaseModel):
    """Everything that decides how a `transformers serve` server is started; UsageError on a bad value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: HfMode
    model: str = Field("tiny", min_length=1, description="tiny, a directory or a hub id (weights are loaded)")
    host: str = "127.0.0.1"
    port: int | None = None
    # hf-continuous: most tokens in one step (prefill chunks and decodes); None: the launcher's
    # choice, CPU_MAX_BATCH_TOKENS on a machine without a GPU, else transformers' own default.
    max_batch_tokens: Annotated[int, Strict(), Field(gt=0)] | None = None
    # hf-continuous on a machine without a GPU: the host memory its paged cache and attention
    # masks may take (None: its own default, most of the machine's memory).
    cpu_cache_bytes: Annotated[int, Strict(), Field(gt=0)] | None = DEFAULT_CPU_CACHE_BYTES
    startup_timeout_s: Seconds = 300.0
    stop_grace_s: Seconds = 20.0
    # The Python of the environment that has transformers' serving extras; None: BATCHBENCH_SERVER_PYTHON's.
    server_python: str | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _as_usage_error(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise as_usage_error(exc, "transformers server") from exc


@dataclass
class TransformersServerInfo:
    """What is recorded beside the server's log, and carried into every run's manifest."""

    mode: HfMode
    model: str
    model_path: str
    base_url: str
    argv: list[str]
    env_overrides: dict[str, str]
    server_distribution: str
    server_version: str
    pid: int
    started_at: str
    continuous_batching: bool
    # Its token budget per step as passed (None: transformers' own default).
    max_batch_tokens: int | None
    ready_after_s: float | None = None
    host_name: str = field(default_factory=platform.node)
    # It writes no per-step log: runs against it are judged on the client's figures.
    step_log: str | None = None


class TransformersServer(ServerProcess):
    """A running `transformers serve`. Use as a context manager, or call `stop()`."""

    kind = SERVER_NAME

    def ready(self, client: httpx.Client) -> bool:
        """/health answers 200: the model is loaded (it loads before serving) and the batching worker lives."""
        try:
            return client.get(HEALTH_PATH).status_code == 200
        except httpx.HTTPError:
            return False


def step_token_budget(spec: TransformersSpec, on_cpu: bool) -> int | None:
    """The tokens per step hf-continuous is given: the spec's, else the launcher's on a CPU;
    None: transformers' own default (and for hf-sequential, which has no steps of its own)."""
    if spec.mode != "hf-continuous":
        return None
    return spec.max_batch_tokens or (CPU_MAX_BATCH_TOKENS if on_cpu else None)


def build_transformers_command(
    spec: TransformersSpec,
    model: ResolvedModel,
    port: int,
    python: str,
    host_memory_bytes: int | None = None,
    *,
    temp_dir: Path | None = None,
    cache_dir: Path | None = None,
    inherited: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The exact argv and environment overrides for a server; pure, no side effects.

    `host_memory_bytes`: this machine's memory when it has no GPU (the cache is then
    host memory, sized as a fraction of it); None on a GPU machine.
    `temp_dir`: the server's own temp dir (none: the inherited one).
    `cache_dir`: where torch's compile cache goes (none: torch's default, in the temp dir);
    `inherited`, the environment the server would inherit, may place it instead.
    """
    argv = [python, "-m", "transformers.cli.transformers", "serve", model.path]
    argv += ["--host", spec.host, "--port", str(port), "--log-level", "info"]
    if spec.mode == "hf-continuous":
        argv += ["--continuous-batching"]
        max_batch_tokens = step_token_budget(spec, on_cpu=host_memory_bytes is not None)
        if max_batch_tokens is not None:
            argv += ["--cb-max-batch-tokens", str(max_batch_tokens)]
        if host_memory_bytes is not None and spec.cpu_cache_bytes is not None:
            argv += ["--cb-max-memory-percent", f"{min(1.0, spec.cpu_cache_bytes / host_memory_bytes):.4f}"]
    # A local directory needs no hub: offline, a lookup cannot stall the start on a network timeout.
    env = {"HF_HUB_OFFLINE": "1"} if Path(model.path).is_dir() else {}
    if temp_dir is not None:
        env |= temp_env(temp_dir)
    if cache_dir is not None:
        env |= compile_cache_env(cache_dir, inherited or {})
    return argv, env


def check_servable(model: str) -> None:
    """Refuse, before anything is made, a model `transformers serve` cannot load: a profile without weights."""
    profile = parse_profile_argument(model)
    if profile is not None and not profile.with_weights:
        raise UsageError(
            f"transformers serve loads real weights, and {model} has none (made for vLLM's"
            " --load-format dummy): use tiny or a model directory"
        )


def start_transformers(spec: TransformersSpec, *, log_dir: Path) -> TransformersServer:
    """Start the server `spec` describes and wait until it serves; returns a handle (a context manager).

    Raises UsageError for what cannot be started (busy port, a model without weights,
    transformers' serving extras missing) and ServerError if it dies or is not ready in
    time; either way no process and no temp file is left behind.
    """
    check_servable(spec.model)
    settings = Settings.from_env()
    port = chosen_port(spec.host, spec.port)
    resolved = resolve_model(spec.model)
    python = spec.server_python or settings.server_python
    version = probe_serving(python)
    log_dir.mkdir(parents=True, exist_ok=True)
    host_memory = None if Path(NVIDIA_CONTROL_DEVICE).exists() else psutil.virtual_memory().total
    base_url = f"http://{spec.host}:{port}"

    def command(temp_dir: Path) -> tuple[list[str], dict[str, str]]:
        return build_transformers_command(spec, resolved, port, python, host_memory,
                                          temp_dir=temp_dir, cache_dir=settings.cache_dir, inherited=settings.environ)

    def handle_of(process: subprocess.Popen, argv: list[str], env_overrides: dict[str, str],
                  temp_dir: ServerTempDir) -> TransformersServer:
        info = TransformersServerInfo(
            mode=spec.mode,
            model=resolved.path,
            model_path=resolved.path,
            base_url=base_url,
            argv=argv,
            env_overrides=env_overrides,
            server_distribution="transformers",
            server_version=version,
            pid=process.pid,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            continuous_batching=spec.mode == "hf-continuous",
            max_batch_tokens=step_token_budget(spec, on_cpu=host_memory is not None),
        )
        logger.info(f"starting {SERVER_NAME} ({spec.mode}, model {resolved.argument}) on {base_url}")
        return TransformersServer(process, info, log_dir / "server.log", temp_dir, spec.startup_timeout_s,
                                  spec.stop_grace_s)

    return launch(command, settings.environ, log_dir / "server.log", handle_of, grace_s=spec.stop_grace_s)


def probe_serving(python: str) -> str:
    """transformers' version for `python`; UsageError when its serving extras are missing there."""
    result = subprocess.run([python, "-c", _PROBE_SERVING], capture_output=True, text=True, timeout=60)
    if result.returncode == 3:
        raise UsageError(f"transformers serve needs {result.stdout.strip()} for {python}: run `make setup`")
    if result.returncode != 0:
        raise UsageError(f"could not inspect transformers with {python}: {result.stderr.strip().splitlines()[-1:]}")
    return result.stdout.strip()
