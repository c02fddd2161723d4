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
- `sglang`: SGLang's OpenAI routes take vLLM's `min_tokens` and `ignore_eos`, and
  `return_token_ids`, which its completions stream answers with each chunk's `token_ids`
  (python/sglang/srt/entrypoints/openai/protocol.py, serving_completions.py): counted as
  on vLLM. Its chat stream carries no ids (serving_chat.py), so on chat the text is
  re-tokenised (`for_endpoint`). `cache_salt` is a field of both request models.
  Its /v1/tokenize has vLLM's shape; its /metrics (--enable-metrics) has its own names.
- `tgi`: Hugging Face TGI. Its OpenAI routes have no field that forces a length:
  `ignore_eos_token` is internal to its benchmark tool, never exposed over HTTP
  (router/src/lib.rs GenerateParameters, CompletionRequest, ChatRequest; issues #1304,
  #1944), so `max_tokens` is a cap, as for `openai`. Its completions stream one token a
  chunk and ends with the usage; chat sends the usage on `stream_options` (server.rs,
  chat.rs). Version from /info; its /tokenize takes {"inputs"} and answers a token list.
- `llamacpp`: llama.cpp's `llama-server`. `n_predict` (read before `max_tokens`) and
  `ignore_eos`, which biases every end-of-generation token to -inf, pass through its
  OpenAI routes (tools/server/README.md, server-common.cpp, server-task.cpp). Its
  OpenAI chunks carry token ids only inside `logprobs`: `n_probs` 1 with
  `post_sampling_probs` names each sampled token's id there, read off the candidates the
  sampler already made (server-context.cpp populate_token_probs), and the ids are the
  count, as on vLLM. Re-tokenising its text undercounts: a special token it generates
  (BOS, unknown) is streamed as no text. It has no per-run cache scope: `cache_prompt`
  false keeps each slot from reusing the prompt it held before (server-context.cpp). It
  closes every streamed response's connection, so each request opens its own. Its
  /tokenize takes {"content"} and answers the token ids, which check the prompts'
  lengths; its /metrics (--metrics) has `llamacpp:` names.
- `trtllm`: TensorRT-LLM's `trtllm-serve`. `min_tokens` and `ignore_eos` on both routes;
  its request models forbid unknown fields, so nothing else is sent
  (tensorrt_llm/serve/openai_protocol.py). Its completions stream carries token ids
  only with `detokenize` false, in place of the text, and chat never
  (postprocess_handlers.py): the text is re-tokenised beside its running usage.
  Its /version answers as vLLM's; /_internal/tokenize has vLLM's shape (recent
  releases); its /metrics is JSON iteration stats.

Where a kind forces the length and the server still stops short or runs long (a stop
string, a server-side cap, llama.cpp's last multi-byte character), the request fails as
`length_mismatch`, as on vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.workload.prompts import TokenizerLike

# Fields by which a request asks for each chunk's token ids: vLLM's and SGLang's own list, and
# llama-server's logprobs, which name the sampled token's id.
_TOKEN_ID_FIELDS = ("return_token_ids", "n_probs")
# The warm-up's cache scope: no run's tag (harness.driver.steps.request_tag) can equal it.
WARM_UP_CACHE_SCOPE = "bb-warm-up"
# The kinds `run --backend` offers, in the order of BACKENDS.
BackendName = Literal["vllm", "transformers", "openai", "sglang", "tgi", "llamacpp", "trtllm"]


@dataclass(frozen=True)
class Backend:
    """What the driver sends to, and believes of, one kind of server."""

    name: BackendName
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
    # POST `tokenize_body` answering {"count"} or {"tokens": [...]}; None: the kind has none of those shapes.
    tokenize_path: str | None = None
    # The body asking `tokenize_path` to count (model, text) as a completion's prompt is counted.
    tokenize_body: Callable[[str, str], dict[str, Any]] = lambda model, text: {"model": model, "prompt": text}
    # Prometheus text with vLLM's metric names (harness.telemetry.metrics); None: the kind has none of those.
    metrics_path: str | None = None
    # GET answering {"version": ...}, the server's own release; None: the kind has none.
    version_path: str | None = None
    # GET answering the server's configuration, where it states B (harness.driver.endpoint.stated_max_num_seqs).
    config_path: str | None = None
    # The request field that scopes the server's prefix cache (its blocks are reused only
    # by requests of the same value); None: the kind has none.
    cache_scope_field: str | None = None
    # Fields that keep a kind with no such scope from reusing any earlier request's prompt.
    cache_off_fields: dict[str, Any] = field(default_factory=dict)
    # Headers every streamed request carries.
    stream_headers: dict[str, str] = field(default_factory=dict)
    # The kind as it talks on the chat endpoint, where its chat stream differs; None: as on completions.
    on_chat: Backend | None = None

    def for_endpoint(self, endpoint: str) -> Backend:
        """The kind as it talks on `endpoint` ("completions" or "chat")."""
        return self.on_chat if endpoint == "chat" and self.on_chat is not None else self

    def request_body(self, model: str, prompt: str, tokens: int, endpoint: str,
                     cache_scope: str = "") -> dict[str, Any]:
        """The streamed request's JSON body for `prompt`, asking for `tokens` output tokens.

        `cache_scope` (a run's tag) keeps the prefix cache of one run apart from every other's.
        """
        body: dict[str, Any] = {"model": model, **self.length_fields(tokens), "stream": True, **self.stream_fields,
                                **self.cache_off_fields}
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
        body = {"model": model, "prompt": prompt, **self.length_fields(tokens), **self.cache_off_fields}
        if self.cache_scope_field:
            body[self.cache_scope_field] = WARM_UP_CACHE_SCOPE
        return body

    @property
    def asks_token_ids(self) -> bool:
        """Requests ask for each chunk's token ids: a stream without them is a fault."""
        return any(self.stream_fields.get(name) for name in _TOKEN_ID_FIELDS)

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


def _min_tokens_length(tokens: int) -> dict[str, Any]:
    # vLLM's fields, which SGLang and TensorRT-LLM declare too.
    return {"max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True}


def _transformers_length(tokens: int) -> dict[str, Any]:
    # A JSON string: the server builds a GenerationConfig from it (transformers/cli/serving/utils.py).
    config = {"max_new_tokens": tokens, "min_new_tokens": tokens, "eos_token_id": -1}
    return {"max_tokens": tokens, "generation_config": json.dumps(config)}


def _openai_length(tokens: int) -> dict[str, Any]:
    return {"max_tokens": tokens}


def _llamacpp_length(tokens: int) -> dict[str, Any]:
    # n_predict is what llama-server reads first; max_tokens for any proxy in between.
    return {"max_tokens": tokens, "n_predict": tokens, "ignore_eos": True}


VLLM = Backend(
    name="vllm",
    forces_length=True,
    retokenizes=False,
    length_fields=_min_tokens_length,
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
# Running usage in every chunk: the count where no token ids arrive.
_CONTINUOUS_USAGE = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
_SGLANG_CHAT = Backend(
    name="sglang",
    forces_length=True,
    retokenizes=True,
    length_fields=_min_tokens_length,
    stream_fields=_CONTINUOUS_USAGE,
    tokenize_path="/v1/tokenize",
    cache_scope_field="cache_salt",
)
SGLANG = replace(
    _SGLANG_CHAT,
    retokenizes=False,
    stream_fields={**_CONTINUOUS_USAGE, "return_token_ids": True},
    on_chat=_SGLANG_CHAT,
)
TGI = Backend(
    name="tgi",
    forces_length=False,
    retokenizes=True,
    length_fields=_openai_length,
    # Chat reads it; completions always end with the usage and ignore fields they lack.
    stream_fields={"stream_options": {"include_usage": True}},
    version_path="/info",
)
LLAMACPP = Backend(
    name="llamacpp",
    forces_length=True,
    retokenizes=False,
    length_fields=_llamacpp_length,
    # Chat reads stream_options; completions always end with the usage. The sampled token's
    # id in each chunk's logprobs: the count of what arrived.
    stream_fields={"stream_options": {"include_usage": True}, "n_probs": 1, "post_sampling_probs": True},
    # A slot otherwise starts from the longest prefix it shares with the prompt it held last.
    cache_off_fields={"cache_prompt": False},
    # It closes a streamed response's connection just after the last chunk, though the response
    # said keep-alive (server-http.cpp's chunked provider returns false after sink.done(), which
    # cpp-httplib counts as a cancelled write): a request sent on it at that moment, as a wave's
    # first is, went unanswered (docs/validation/llama-server.md). Each asks for its own.
    stream_headers={"Connection": "close"},
    # Special tokens added as its completions add them (its /tokenize adds none by default).
    tokenize_path="/tokenize",
    tokenize_body=lambda model, text: {"content": text, "add_special": True},
)
TRTLLM = Backend(
    name="trtllm",
    forces_length=True,
    retokenizes=True,
    length_fields=_min_tokens_length,
    stream_fields=_CONTINUOUS_USAGE,
    tokenize_path="/_internal/tokenize",
    version_path="/version",
)

BACKENDS: dict[str, Backend] = {
    backend.name: backend for backend in (VLLM, TRANSFORMERS, OPENAI, SGLANG, TGI, LLAMACPP, TRTLLM)
}
assert tuple(BACKENDS) == get_args(BackendName), "BACKENDS out of step with BackendName"


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
