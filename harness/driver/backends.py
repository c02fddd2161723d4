"""The kinds of server the driver talks to, each in one place.

Per kind: how a request asks for an exact output length, how the tokens that arrive
are counted, and which health, model-list, tokenize and metrics endpoints exist.

- `vllm`: `min_tokens` = `max_tokens` with `ignore_eos` force the length; `return_token_ids`
  makes every chunk carry its token ids, which are the count (harness.driver.stream). A
  stream without them fails (`no_token_ids`): its count would rest on the usage alone.
  Every request carries its run's `cache_salt`: with the prefix cache on, a run reuses
  its own requests' blocks only, never a repetition's or the warm-up's.
- `transformers`: `transformers serve`. Its request schema refuses vLLM's fields (HTTP 422),
  and its chunks carry text only, with the count in the final usage. The length is forced
  through its own per-request `generation_config`: `eos_token_id` -1 turns end-of-sequence
  off (the one per-request stop its continuous batching reads besides `max_new_tokens`),
  and `min_new_tokens` = `max_new_tokens` holds its sequential `generate()` to the length.
  The streamed text is re-tokenised with the run's tokenizer to cross-check the usage: a
  usage past what the text can hold fails (`usage_beyond_text`, harness.driver.stream.text_can_hold).
  It is pinned to one model, named by its path, and has no model list that names it.
- `openai`: any other OpenAI-compatible server. Only standard fields are sent: the length
  is a cap, never forced, so no request of it counts as exact. The streamed text is
  re-tokenised too, beside the server's usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.workload.prompts import TokenizerLike

# The warm-up's cache scope: no run's tag (harness.driver.steps.request_tag) can equal it.
WARM_UP_CACHE_SCOPE = "bb-warm-up"


@dataclass(frozen=True)
class Backend:
    """What the driver sends to, and believes of, one kind of server."""

    name: str
    # Requests ask for exactly their length through options this kind honours.
    forces_length: bool
    # No token ids arrive: the streamed text is kept and re-tokenised to cross-check the usage.
    retokenizes: bool
    # Fields that fix the output length, in the order they are sent.
    length_fields: Callable[[int], dict[str, Any]]
    # Fields that ask for usage (and token ids) in the stream.
    stream_fields: dict[str, Any]
    # The stream ends with `data: [DONE]`; else the chunk carrying a finish_reason is its end.
    sends_done: bool = True
    # An OpenAI model list naming the served model; None: the kind has none that does.
    models_path: str | None = "/v1/models"
    health_path: str | None = "/health"
    # POST {"model", "prompt"} answering {"count"}; None: the kind has none.
    tokenize_path: str | None = None
    # Prometheus text with vLLM's metric names (harness.telemetry.metrics); None: the kind has none.
    metrics_path: str | None = None
    # GET answering {"version": ...}, the server's own release; None: the kind has none.
    version_path: str | None = None
    # GET answering the server's configuration, where it states B (harness.driver.endpoint.stated_max_num_seqs).
    config_path: str | None = None
    # The request field that scopes the server's prefix cache (its blocks are reused only
    # by requests of the same value); None: the kind has none.
    cache_scope_field: str | None = None

    def request_body(self, model: str, prompt: str, tokens: int, endpoint: str,
                     cache_scope: str = "") -> dict[str, Any]:
        """The streamed request's JSON body for `prompt`, asking for `tokens` output tokens.

        `cache_scope` (a run's tag) keeps the prefix cache of one run apart from every other's.
        """
        body: dict[str, Any] = {"model": model, **self.length_fields(tokens), "stream": True, **self.stream_fields}
        if cache_scope and self.cache_scope_field:
            body[self.cache_scope_field] = cache_scope
        if endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return body

    def warm_up_body(self, model: str, prompt: str, tokens: int) -> dict[str, Any]:
        """A short unstreamed completion's body, asking for `tokens` output tokens.

        Scoped apart from every run, so no run finds the warm-up's prompt in the prefix cache.
        """
        body = {"model": model, "prompt": prompt, **self.length_fields(tokens)}
        if self.cache_scope_field:
            body[self.cache_scope_field] = WARM_UP_CACHE_SCOPE
        return body

    @property
    def asks_token_ids(self) -> bool:
        """Requests ask for each chunk's token ids: a stream without them is a fault."""
        return bool(self.stream_fields.get("return_token_ids"))

    def length_exact(self, ok: bool, requested: int, arrived: int, usage_completion: int, retokenized: int) -> bool:
        """Whether a request is known to have generated exactly `requested` tokens.

        Never for a kind that cannot force the length. Where token ids are counted, an ok
        request is exact (its verdict compared ids, usage and length, and failed a stream
        without ids). Where only text arrives, the usage, the count and the re-tokenised
        text must all agree: a server whose usage claims n tokens while its text holds
        fewer, but not so few that the request failed (usage_beyond_text), is not exact.
        """
        if not (ok and self.forces_length and arrived == requested):
            return False
        return not self.retokenizes or usage_completion == arrived == retokenized


def _vllm_length(tokens: int) -> dict[str, Any]:
    return {"max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True}


def _transformers_length(tokens: int) -> dict[str, Any]:
    # A JSON string: the server builds a GenerationConfig from it (transformers/cli/serving/utils.py).
    config = {"max_new_tokens": tokens, "min_new_tokens": tokens, "eos_token_id": -1}
    return {"max_tokens": tokens, "generation_config": json.dumps(config)}


def _openai_length(tokens: int) -> dict[str, Any]:
    return {"max_tokens": tokens}


VLLM = Backend(
    name="vllm",
    forces_length=True,
    retokenizes=False,
    length_fields=_vllm_length,
    stream_fields={
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        # vLLM then sends each chunk's token ids: the count of what arrived (harness.driver.stream).
        "return_token_ids": True,
    },
    tokenize_path="/tokenize",
    metrics_path="/metrics",
    version_path="/version",
    # Served only with VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/launchers/api_server/routers.py).
    config_path="/server_info?config_format=json",
    # Prefix-cache isolation (vLLM >= 0.9): blocks are hashed with the salt.
    cache_scope_field="cache_salt",
)
TRANSFORMERS = Backend(
    name="transformers",
    forces_length=True,
    retokenizes=True,
    length_fields=_transformers_length,
    # It always sends the usage in its last chunk, and logs a warning for stream_options.
    stream_fields={},
    # Its completions stream ends with the finish_reason and usage chunk, no [DONE].
    sends_done=False,
    # Its /v1/models lists the hub cache (an error where there is none), never the model it is pinned to.
    models_path=None,
)
OPENAI = Backend(
    name="openai",
    forces_length=False,
    retokenizes=True,
    length_fields=_openai_length,
    stream_fields={"stream_options": {"include_usage": True}},
    health_path=None,
)

BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (VLLM, TRANSFORMERS, OPENAI)}


def check_distributable(backend: Backend) -> None:
    """Refuse a distributed run (`--workers`) for a kind other than vLLM: workers hold no
    tokenizer to re-tokenise with, and their brief names no backend."""
    if backend is not VLLM:
        raise UsageError(f"the {backend.name} backend runs in one process only: drop --workers")


def text_token_counter(tokenizer: TokenizerLike) -> Callable[[str], int]:
    """Counts a streamed text's tokens as `tokenizer` does, adding no special tokens (a
    server streams none of those: it decodes with them skipped)."""

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    return count
