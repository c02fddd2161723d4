"""Talking to the server outside the measured load: checks, token counts, warm-up."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.errors import UsageError


@dataclass(frozen=True)
class EndpointInfo:
    """What the server says it serves."""

    base_url: str
    model: str
    # vLLM reports the model's source (directory or hub id) as `root`.
    root: str | None
    max_model_len: int | None


def probe_endpoint(base_url: str, headers: dict[str, str], model: str | None) -> EndpointInfo:
    """Check the server answers and serves `model` (default: its only model)."""
    url = base_url.rstrip("/")
    try:
        response = httpx.get(f"{url}/v1/models", headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise UsageError(f"cannot reach {url}: {exc}") from exc
    if response.status_code in (401, 403):
        raise UsageError(f"{url} refused the request (HTTP {response.status_code}): pass a key with --api-key-env")
    if response.status_code != 200:
        raise UsageError(f"{url}/v1/models answered HTTP {response.status_code}: is this an OpenAI-compatible server?")
    served = {entry["id"]: entry for entry in response.json().get("data", [])}
    if model is None:
        if len(served) != 1:
            raise UsageError(f"{url} serves {sorted(served) or 'no model'}: choose one with --model")
        model = next(iter(served))
    if model not in served:
        raise UsageError(f"model {model!r} is not served at {url} (served: {', '.join(sorted(served))})")
    entry = served[model]
    return EndpointInfo(url, model, entry.get("root"), entry.get("max_model_len"))


def server_token_counter(info: EndpointInfo, headers: dict[str, str]) -> Callable[[str], int] | None:
    """A function counting prompt tokens with the server's own /tokenize, or None if absent."""
    client = httpx.Client(base_url=info.base_url, headers=headers, timeout=30)
    probe = client.post("/tokenize", json={"model": info.model, "prompt": "hello"})
    if probe.status_code != 200:
        client.close()
        return None

    def count(text: str) -> int:
        return client.post("/tokenize", json={"model": info.model, "prompt": text}).json()["count"]

    return count


def load_tokenizer(source: str | None, info: EndpointInfo):
    """The tokenizer prompts are built with: `source`, else the served model's local root."""
    candidate = source or info.root
    if candidate is None or not (Path(candidate).expanduser().is_dir() or source):
        raise UsageError(
            f"no local tokenizer for {info.model!r} (server root: {info.root}): pass --tokenizer DIR"
        )
    from transformers import AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return AutoTokenizer.from_pretrained(str(Path(candidate).expanduser()))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load a tokenizer from {candidate}: {exc}".splitlines()[0]) from exc


def warm_up(info: EndpointInfo, headers: dict[str, str], batch: int, prompt: str, rounds: int = 2) -> None:
    """Send `rounds` full batches of short requests, so new batch shapes compile before measuring."""
    import gevent
    from gevent.pool import Pool

    body = {"model": info.model, "prompt": prompt, "max_tokens": 8, "min_tokens": 8, "ignore_eos": True}
    with httpx.Client(base_url=info.base_url, headers=headers, timeout=300) as client:
        for _ in range(rounds):
            pool = Pool(batch)
            jobs = [pool.spawn(client.post, "/v1/completions", json=body) for _ in range(batch)]
            gevent.joinall(jobs)
