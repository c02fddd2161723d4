"""What decides how a vLLM server is started: the one owner of every server parameter.

`ServerConfig` holds the parameters a user chooses, each with its default, its range and
its description. The server flags of every command that launches vLLM are generated
from it (harness.cli.server_options), and a nightly suite's `server:` block is
validated by it. `ServerSpec` adds what the caller decides: the mode, the port, and the
settings experiments pin. `Endpoints` names the servers a job is given instead of launching
them (harness.sweep.servers.run_targets turns both into the servers a job runs on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from harness.errors import UsageError
from harness.systems import MODES, Mode
from harness.workload.limits import Batch, NonNegativeSeconds, Seconds
from launchers.engine.vllm_releases import releases_in_words
from launchers.layout import LAYOUTS, Layout

# B, the batch width of every system, where none is chosen: vLLM's --max-num-seqs. In the
# harness's code it is `batch_size`; a launcher's config keeps vLLM's name for it.
DEFAULT_BATCH_SIZE = 16
JobPlacement = Literal["auto", "shared", "one-at-a-time"]
PLACEMENTS: tuple[JobPlacement, ...] = ("auto", "shared", "one-at-a-time")

class ServerConfig(BaseModel):
    """The server parameters a user chooses (command-line flags, a suite's `server:` block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field("tiny", description="model to serve: tiny, llama-3.1-8b, opt-13b, a directory or a hub id")
    max_num_seqs: Batch = Field(DEFAULT_BATCH_SIZE, description="B: most sequences in a batch, for every system")
    host: str = Field("127.0.0.1", description="interface to listen on")
    # A burst's sends span 60-270 ms and reach the engine later still: at 0 its first static batch
    # formed with 1-3 of 16 slots. Counted from the oldest waiting arrival, the delay costs a burst
    # nothing after its first batch (docs/rate-sweep.md#statics-max-batch-delay).
    batch_wait_s: NonNegativeSeconds = Field(
        1.0, description="static mode: wait up to this long (from the oldest waiting arrival) for a full batch")
    # None: vLLM's own sizing on a GPU; the CPU build refuses to start without a size.
    kv_cache_bytes: Annotated[int, Strict(), Field(gt=0)] | None = Field(
        None, description="KV cache size in bytes (unset: 1 GiB on the CPU build, vLLM's own sizing on a GPU)")
    startup_timeout_s: Seconds = Field(600.0, description="give up if the server is not ready by then")
    # Where the server's processes run and at what priority (launchers.layout).
    layout: Layout = Field("auto", description="process layout: engine-with-worker pins vLLM's spinning engine core"
                           " beside its worker so the client and API server get CPU; auto is engine-with-worker on"
                           " machines of <= 4 cores, as-launched elsewhere (launchers/layout.py)")
    vllm_args: tuple[str, ...] = Field(
        (), description="extra vLLM arguments, passed last, in order", json_schema_extra={"repeatable": True}
    )
    # How a job's two vLLM servers share the host (harness.sweep.placing): forced, to measure a placement anywhere.
    placement: JobPlacement = Field(
        "auto", description="a job's vLLM servers: auto places them by the GPUs and the model (side by side on a"
        " CPU host), shared keeps both up together, one-at-a-time starts each system's server alone, stopping the"
        " other, and restarts them between systems (docs/gpu.md#placement)")
    # The vLLM the user deploys, in its own environment: batchbench only runs it and never installs there.
    server_python: str | None = Field(
        None, description="the Python of the vLLM environment to launch (default: $BATCHBENCH_SERVER_PYTHON, else"
        " batchbench's own); its vLLM's version is read from it and checked")
    server_env: tuple[str, ...] = Field(
        (), description="NAME=VALUE set in the server's environment (e.g. a vLLM setting an A/B compares); a"
        " PYTHONPATH given here goes after the engine plugins", json_schema_extra={"repeatable": True})
    # Static mode and the step log live in vLLM's scheduler internals (launchers.engine.vllm_releases).
    allow_untested_vllm: bool = Field(
        False, description=f"launch a vLLM release outside the tested {releases_in_words()} (every report then says"
        " UNTESTED VLLM beside its headline)")

    @field_validator("model")
    @classmethod
    def _not_empty(cls, model: str) -> str:
        if not model:
            # An empty path would resolve to the working directory.
            raise ValueError("model must not be empty: use tiny, a profile name, a directory or a hub id")
        return model

    @field_validator("server_python")
    @classmethod
    def _python_named(cls, python: str | None) -> str | None:
        if python is not None and not python.strip():
            raise ValueError("server_python must not be empty: name the Python of a vLLM environment")
        return python

    @field_validator("server_env")
    @classmethod
    def _assignments(cls, assignments: tuple[str, ...]) -> tuple[str, ...]:
        for assignment in assignments:
            name, equals, _ = assignment.partition("=")
            if not equals or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
                raise ValueError(f"server_env {assignment!r}: write NAME=VALUE, NAME a variable name")
        return assignments

    def environment(self) -> dict[str, str]:
        """`server_env` as a mapping (a later NAME wins)."""
        return dict(assignment.split("=", 1) for assignment in self.server_env)

    @field_validator("placement", "layout", mode="before")
    @classmethod
    def _known_choice(cls, value: object, info: ValidationInfo) -> object:
        known: tuple[str, ...] = {"placement": PLACEMENTS, "layout": LAYOUTS}[str(info.field_name)]
        if value not in known:
            raise ValueError(f"unknown {info.field_name} {value!r}: use one of {', '.join(known)}")
        return value


class ServerSpec(ServerConfig):
    """Everything that decides how a server is started; UsageError on a bad value."""

    mode: Mode
    port: int | None = None
    # Same value for both modes, so they differ only in admission (see static_scheduler).
    # None: what the installed vLLM does (the CPU build forces it off).
    async_scheduling: bool | None = None
    stop_grace_s: float = 20.0

    @classmethod
    def of(cls, config: ServerConfig, mode: Mode, port: int | None = None) -> ServerSpec:
        """The server `config` describes, in `mode` (port None: a free one)."""
        return cls(mode=mode, port=port, **config.model_dump())

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, mode: object) -> object:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
        return mode

    @model_validator(mode="wrap")
    @classmethod
    def _as_usage_error(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # A spec is built by code, from values a user gave: a bad one is the user's to fix.
        try:
            return handler(data)
        except ValidationError as exc:
            raise as_usage_error(exc, "server") from exc


@dataclass(frozen=True)
class Endpoints:
    """Servers already running, given instead of launched ones; None: launch that one here."""

    continuous: str | None = None
    static: str | None = None
    # Where the prompts' tokenizer is when the endpoints' model is not a local directory.
    tokenizer: str | None = None
    # The model an endpoint must serve; None: its only one.
    model: str | None = None
    # The kind of server at the endpoints (a harness.driver.backends name); None: vLLM.
    backend: str | None = None
    # The context in tokens the user states for the endpoints' server; None: as the server states it.
    max_model_len: int | None = None


def as_usage_error(exc: ValidationError, subject: str) -> UsageError:
    """A spec's first validation error as the user's one-line error; `subject` names the spec."""
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "value_error":
        return UsageError(message)
    return UsageError(f"{subject} {field}: {message} (got {error.get('input')!r})")
