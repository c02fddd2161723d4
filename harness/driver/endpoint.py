"""Talking to the server outside the measured load: checks, token counts, warm-up."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar, cast

import httpx
from pydantic import BaseModel, Field, Strict, StrictInt, StrictStr, ValidationError, model_validator

from harness.driver.backends import VLLM, Backend
from harness.driver.work import WARM_UP_TOKENS
from harness.errors import ServerError, UsageError
from harness.workload.prompts import TokenizerLike
from harness.workload.tokenizer_file import file_tokenizer

ModelT = TypeVar("ModelT", bound=BaseModel)
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointInfo:
    """What the server says it serves."""

    base_url: str
    model: str
    # vLLM reports the model's source (directory or hub id) as `root`.
    root: str | None
    max_model_len: int | None
    # Who the server says owns the model; the calibration endpoint says so there.
    owned_by: str | None = None
    # The version the server reports of itself (vLLM's /version); None where it gives none.
    server_version: str | None = None


class _ModelEntry(BaseModel):
    id: StrictStr
    root: StrictStr | None = None
    owned_by: StrictStr | None = None
    max_model_len: Annotated[int, Strict(), Field(gt=0)] | None = None


class _ModelList(BaseModel):
    """The shape of an OpenAI-compatible /v1/models answer (other fields ignored)."""

    data: list[_ModelEntry]


class _Version(BaseModel):
    """vLLM's /version answer."""

    version: StrictStr


class _SchedulerConfig(BaseModel):
    max_num_seqs: Annotated[int, Strict(), Field(gt=0)]


class _VllmConfig(BaseModel):
    scheduler_config: _SchedulerConfig


class _ServerInfo(BaseModel):
    """The part of vLLM's /server_info?config_format=json answer that states B (other fields ignored)."""

    vllm_config: _VllmConfig


class _TokenCount(BaseModel):
    """A /tokenize answer: vLLM's states the count, llama-server's only the token ids."""

    count: Annotated[int, Strict(), Field(ge=0)] | None = None
    tokens: list[StrictInt] | None = None

    @model_validator(mode="after")
    def _counts(self) -> _TokenCount:
        if self.count is None and self.tokens is None:
            raise ValueError("neither a count nor tokens")
        return self

    @property
    def number(self) -> int:
        """The prompt's tokens."""
        return self.count if self.count is not None else len(self.tokens or ())


def probe_endpoint(base_url: str, headers: dict[str, str], model: str | None, backend: Backend = VLLM) -> EndpointInfo:
    """Check the server answers and serves `model` (default: its only model).

    A kind with no model list (`backend.models_path` None) is asked its health instead,
    and `model` must be given: it is what every request names.
    """
    url = base_url.rstrip("/")
    if backend.models_path is None:
        return _probe_unlisted(url, headers, model, backend)
    response = _get(url, backend.models_path, headers)
    models = _parse(_ModelList, response.content, f"{url}{backend.models_path}")
    served = {entry.id: entry for entry in models.data}
    if model is None:
        if len(served) != 1:
            raise UsageError(f"{url} serves {sorted(served) or 'no model'}: choose one with --model")
        model = next(iter(served))
    if model not in served:
        raise UsageError(f"model {model!r} is not served at {url} (served: {', '.join(sorted(served)) or 'none'})")
    entry = served[model]
    return EndpointInfo(url, model, entry.root, entry.max_model_len, entry.owned_by,
                        _server_version(url, headers, backend))


def _server_version(url: str, headers: dict[str, str], backend: Backend) -> str | None:
    """What the server's version route says (vLLM's `/version`); None where it has none or says nothing usable."""
    if backend.version_path is None:
        return None
    try:
        response = httpx.get(f"{url}{backend.version_path}", headers=headers, timeout=10)
        return _Version.model_validate_json(response.content).version if response.status_code == 200 else None
    except (httpx.HTTPError, ValidationError):
        return None


def stated_max_num_seqs(url: str, headers: dict[str, str], backend: Backend = VLLM) -> int | None:
    """B (max_num_seqs) as the server at `url` states it; None where it states none.

    vLLM states its configuration only on `/server_info`, a route it serves only when
    started with VLLM_SERVER_DEV_MODE=1 (0.30-0.34; no metric, no /v1/models field and
    no /version field carries max_num_seqs). Elsewhere that route is absent (404) or is
    not vLLM's: None.
    """
    if backend.config_path is None:
        return None
    try:
        # vLLM gathers its environment report on the first call (seconds).
        response = httpx.get(f"{url.rstrip('/')}{backend.config_path}", headers=headers, timeout=60)
    except httpx.HTTPError:
        return None
    return parse_server_info(response.content) if response.status_code == 200 else None


def parse_server_info(content: bytes) -> int | None:
    """max_num_seqs from vLLM's /server_info JSON answer; None where it does not say it."""
    try:
        return _ServerInfo.model_validate_json(content).vllm_config.scheduler_config.max_num_seqs
    except ValidationError:
        return None


def check_max_num_seqs(info: EndpointInfo, max_num_seqs: int, headers: dict[str, str] | None = None,
                       backend: Backend = VLLM) -> None:
    """Hold B, --max-num-seqs, to what an attached server states; call before any load is sent.

    UsageError (one line, exit 2) where the server states another B. Where it states
    none, B stays the flag's, and a progress line says so.
    """
    stated = stated_max_num_seqs(info.base_url, headers or {}, backend)
    if stated is None:
        logger.info(f"B not stated by the server at {info.base_url}: taken from --max-num-seqs ({max_num_seqs})")
    elif stated != max_num_seqs:
        raise UsageError(
            f"--max-num-seqs {max_num_seqs} does not match the server at {info.base_url}, which runs"
            f" max_num_seqs {stated} (its {backend.config_path}): pass --max-num-seqs {stated}"
        )
    else:
        logger.info(f"B = {stated}: stated by the server at {info.base_url} ({backend.config_path})")


def _probe_unlisted(url: str, headers: dict[str, str], model: str | None, backend: Backend) -> EndpointInfo:
    if model is None:
        raise UsageError(f"--backend {backend.name} lists no served model: name it with --model")
    if backend.health_path is not None:
        _get(url, backend.health_path, headers)
    # A local directory is also where the tokenizer is (load_tokenizer).
    root = model if Path(model).expanduser().is_dir() else None
    return EndpointInfo(url, model, root, None)


def _get(url: str, path: str, headers: dict[str, str]) -> httpx.Response:
    """GET `path`, or a UsageError saying in one line why the server is not usable."""
    try:
        response = httpx.get(f"{url}{path}", headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise UsageError(f"cannot reach {url}: {exc}") from exc
    if response.status_code in (401, 403):
        raise UsageError(f"{url} refused the request (HTTP {response.status_code}): pass a key with --api-key-env")
    if response.status_code != 200:
        raise UsageError(f"{url}{path} answered HTTP {response.status_code}: is this an OpenAI-compatible server?")
    return response


def _parse(shape: type[ModelT], content: bytes, what: str) -> ModelT:
    """`content` as `shape`, or a UsageError saying in one line what the server sent instead."""
    try:
        return shape.model_validate_json(content)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise UsageError(
            f"{what} answered something else than expected ({field + ': ' if field else ''}{error['msg']}):"
            f" {content[:60]!r}"
        ) from exc


def server_token_counter(
    info: EndpointInfo, headers: dict[str, str], backend: Backend = VLLM
) -> Callable[[str], int] | None:
    """A function counting prompt tokens with the server's own /tokenize, or None if absent."""
    path = backend.tokenize_path
    if path is None:
        return None
    client = httpx.Client(base_url=info.base_url, headers=headers, timeout=30)
    try:
        probe = client.post(path, json=backend.tokenize_body(info.model, "hello"))
    except httpx.HTTPError as exc:
        client.close()
        raise ServerError(f"{info.base_url}{path}: {type(exc).__name__}: {exc}") from exc
    if probe.status_code != 200:
        client.close()
        return None

    def count(text: str) -> int:
        try:
            answer = client.post(path, json=backend.tokenize_body(info.model, text))
        except httpx.HTTPError as exc:
            raise ServerError(f"{info.base_url}{path}: {type(exc).__name__}: {exc}") from exc
        return _parse(_TokenCount, answer.content, f"{info.base_url}{path}").number

    return count


def load_tokenizer(source: str | None, info: EndpointInfo) -> TokenizerLike:
    """The tokenizer prompts are built with: `source`, else the served model's local root.

    Read from the directory's tokenizer.json without transformers where that answers the
    same (harness.workload.tokenizer_file: no torch in the load process), else through
    transformers.
    """
    candidate = source or info.root
    if candidate is None or not (Path(candidate).expanduser().is_dir() or source):
        raise UsageError(
            f"no local tokenizer for {info.model!r} (server root: {info.root}): pass --tokenizer DIR"
        )
    directory = Path(candidate).expanduser()
    if (from_file := file_tokenizer(directory)) is not None:
        return from_file
    from transformers import AutoTokenizer

    # Offline for this load only: a tokenizer is read from a directory, never downloaded, and
    # a launched server must not inherit an offline switch the harness set for itself.
    try:
        # transformers' signatures are wider than the protocol mypy compares them with.
        return cast(TokenizerLike, AutoTokenizer.from_pretrained(str(directory), local_files_only=True))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load a tokenizer from {candidate}: {exc}".splitlines()[0]) from exc


def warm_up(
    info: EndpointInfo,
    headers: dict[str, str],
    batch: int,
    prompt: str,
    timeout_s: float,
    rounds: int = 2,
    backend: Backend = VLLM,
    tokens: int = WARM_UP_TOKENS,
) -> None:
    """Send `rounds` full batches of short requests of `tokens` output tokens, so new batch shapes compile
    before measuring.

    ServerError (one line) when any of them fails: a run measured after a failed
    warm-up would measure compilation, or a broken server.
    """
    import gevent
    from gevent.pool import Pool

    body = backend.warm_up_body(info.model, prompt, tokens)
    with httpx.Client(base_url=info.base_url, headers=headers, timeout=timeout_s) as client:
        for _ in range(rounds):
            pool = Pool(batch)
            jobs = [pool.spawn(_warm_up_request, client, body) for _ in range(batch)]
            gevent.joinall(jobs)
            problems = [job.value for job in jobs if job.value]
            if problems:
                raise ServerError(
                    f"warm-up: {len(problems)} of {batch} requests to {info.base_url} failed: {problems[0]}"
                )


def _warm_up_request(client: httpx.Client, body: dict) -> str | None:
    """One warm-up request; what went wrong, as one line, or None. Never raises: a greenlet
    that raised would print its traceback, one per request."""
    try:
        response = client.post("/v1/completions", json=body)
    except Exception as exc:  # noqa: BLE001 - reported as the warm-up's one line
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {' '.join(response.text.split())}"[:300]
    return None
