"""Per kind of server: the body that asks for a length, and what a stream's counts are worth."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from harness.driver.backends import (
    BACKENDS,
    LLAMACPP,
    OPENAI,
    SGLANG,
    TGI,
    TRANSFORMERS,
    TRTLLM,
    VLLM,
    Backend,
    text_token_counter,
)
from harness.driver.endpoint import EndpointInfo, server_token_counter
from harness.driver.outcome import (
    LENGTH_MISMATCH,
    NO_TOKEN_IDS,
    USAGE_BEYOND_TEXT,
    USAGE_MISMATCH,
    Timing,
    record_row,
)
from harness.driver.steps import cache_scope
from harness.driver.stream import StreamReader
from harness.driver.work import NO_WAVE, WorkItem
from harness.errors import UsageError
from harness.workload.tokenizer_file import FileTokenizer

ITEM = WorkItem(
    request_id=3, prompt="hello there", planned_prompt_tokens=2, planned_output_tokens=5,
    requested_output_tokens=5, wave=NO_WAVE, arrival_s=None,
)
# A lie of one chunk claiming all 40 is past what its text can hold (harness.driver.stream.text_can_hold).
LONG = replace(ITEM, requested_output_tokens=40)
WORDS = ["<unk>", "a", "ba", "da", "ga"]


def words() -> FileTokenizer:
    """A word-level tokenizer: one token per space-separated word of WORDS."""
    tokenizer = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return FileTokenizer(tokenizer)


def event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def text_stream(pieces: list[str], usage: int) -> bytes:
    """Text chunks, then the finish_reason with the usage, then [DONE] (which `transformers serve` leaves out)."""
    body = b"".join(event({"choices": [{"text": piece, "index": 0}]}) for piece in pieces)
    final = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}],
             "usage": {"prompt_tokens": 2, "completion_tokens": usage, "total_tokens": 2 + usage}}
    return body + event(final) + b"data: [DONE]\n\n"


def request_body(item: WorkItem, model: str, endpoint: str, backend: Backend = VLLM) -> dict:
    """The body the load user sends (harness.driver.user.request_body, which imports Locust)."""
    return backend.request_body(model, item.prompt, item.requested_output_tokens, endpoint)


def row_of(backend: Backend, body: bytes, item: WorkItem = ITEM, tokenizer: FileTokenizer | None = None) -> dict:
    """What the load user records for a request to `backend` whose response body is `body`."""
    reader = StreamReader(keep_text=backend.retokenizes)
    reader.feed(body, 1.0)
    text = reader.text
    retokenized = text_token_counter(tokenizer or words())(text) if text is not None else -1
    failure = reader.verdict(item.requested_output_tokens, backend.forces_length, True, backend.asks_token_ids,
                             retokenized)
    usage = (reader.usage_prompt, reader.usage_completion)
    return record_row(item, "w", Timing(), 200, reader.arrived, usage, failure, backend, retokenized)


def test_vllm_requests_are_byte_for_byte_what_they_were():
    completions = (
        '{"model": "m", "max_tokens": 5, "min_tokens": 5, "ignore_eos": true, "stream": true,'
        ' "stream_options": {"include_usage": true, "continuous_usage_stats": true}, "return_token_ids": true,'
        ' "prompt": "hello there"}'
    )
    assert json.dumps(request_body(ITEM, "m", "completions")) == completions
    chat = json.loads(json.dumps(request_body(ITEM, "m", "chat")))
    assert chat["messages"] == [{"role": "user", "content": "hello there"}] and "prompt" not in chat
    assert json.dumps(VLLM.warm_up_body("m", "hi", 8)) == (
        '{"model": "m", "prompt": "hi", "max_tokens": 8, "min_tokens": 8, "ignore_eos": true,'
        ' "cache_salt": "bb-warm-up"}'
    )


def test_a_run_scopes_the_prefix_cache_to_itself_where_the_kind_can():
    first, second = (VLLM.request_body("m", "x", 5, "completions", cache_scope(tag)) for tag in ("0a1b", "2c3d"))
    assert (first["cache_salt"], second["cache_salt"]) == ("bb-0a1b", "bb-2c3d")
    assert VLLM.warm_up_body("m", "hi", 8)["cache_salt"] not in (first["cache_salt"], second["cache_salt"])
    # Kinds without a scope field send none: their schemas would refuse it.
    assert all("cache_salt" not in kind.request_body("m", "x", 5, "completions", cache_scope("0a1b"))
               for kind in (TRANSFORMERS, OPENAI))


def test_each_kind_says_which_endpoints_it_has():
    assert list(BACKENDS) == ["vllm", "transformers", "openai", "sglang", "tgi", "llamacpp", "trtllm"]
    assert (VLLM.tokenize_path, VLLM.metrics_path, VLLM.health_path) == ("/tokenize", "/metrics", "/health")
    assert (TRANSFORMERS.tokenize_path, TRANSFORMERS.metrics_path, TRANSFORMERS.health_path) == (None, None, "/health")
    assert (OPENAI.tokenize_path, OPENAI.metrics_path, OPENAI.health_path) == (None, None, None)
    assert (VLLM.models_path, TRANSFORMERS.models_path, OPENAI.models_path) == ("/v1/models", None, "/v1/models")
    # Only vLLM's /metrics has the names the sampler reads; each other kind's tokenize and version routes.
    others = (SGLANG, TGI, LLAMACPP, TRTLLM)
    assert all(kind.metrics_path is None for kind in others)
    assert all((kind.health_path, kind.models_path) == ("/health", "/v1/models") for kind in others)
    assert [kind.tokenize_path for kind in others] == ["/v1/tokenize", None, "/tokenize", "/_internal/tokenize"]
    assert [kind.version_path for kind in others] == [None, "/info", None, "/version"]


def test_transformers_serve_accepts_the_body_and_forces_the_length_in_both_modes():
    """Checked against the installed `transformers serve` handler's own code, no server started."""
    pytest.importorskip("fastapi")
    from transformers import GenerationConfig
    from transformers.cli.serving.chat_completion import ChatCompletionHandler
    from transformers.cli.serving.completion import CompletionHandler

    for handler_class, endpoint in ((CompletionHandler, "completions"), (ChatCompletionHandler, "chat")):
        handler = object.__new__(handler_class)
        handler.generation_state = SimpleNamespace(_compile=False)
        body = request_body(ITEM, "m", endpoint, TRANSFORMERS)
        handler._validate_request(body)  # HTTP 422 for a field its schema lacks (vLLM's min_tokens, ignore_eos)
        for continuous in (False, True):
            config = handler._build_generation_config(body, GenerationConfig(eos_token_id=2), use_cb=continuous)
            # Continuous batching reads max_new_tokens and eos_token_id per request; generate() all three.
            assert (config.max_new_tokens, config.min_new_tokens, config.eos_token_id) == (5, 5, -1)
    vllm_body = request_body(ITEM, "m", "completions", VLLM)
    with pytest.raises(Exception, match="Unexpected fields"):
        object.__new__(CompletionHandler)._validate_request(vllm_body)


def test_openai_requests_carry_only_fields_of_the_openai_schema():
    pytest.importorskip("openai")
    from openai.types.completion_create_params import CompletionCreateParamsBase

    body = request_body(ITEM, "m", "completions", OPENAI)
    assert set(body) <= CompletionCreateParamsBase.__mutable_keys__ | {"stream"}
    assert body["max_tokens"] == 5 and "min_tokens" not in body


def test_an_honest_text_stream_is_exact():
    row = row_of(TRANSFORMERS, text_stream(["a", " ba", " da", " ga", " a"], usage=5))
    assert row["ok"] and row["completion_tokens"] == 5 and row["usage_completion_tokens"] == 5
    assert row["retokenized_completion_tokens"] == 5
    assert row["length_forced"] and row["length_exact"]


def test_usage_claiming_every_token_beside_one_character_of_text_fails_for_every_backend():
    """No token ids; the only text chunk is one character; the usage claims all 40 tokens asked for."""
    body = text_stream(["a"], usage=40)
    for backend in (TRANSFORMERS, OPENAI):
        row = row_of(backend, body, LONG)
        assert row["error_kind"] == USAGE_BEYOND_TEXT and not row["ok"] and not row["length_exact"]
        assert (row["retokenized_completion_tokens"], row["usage_completion_tokens"]) == (1, 40)
        assert row["error"] == "server usage says 40 tokens; its text came in 1 chunks and re-tokenises to 1 tokens"
    # vLLM was asked for token ids: a stream without them fails before its text is weighed.
    row = row_of(VLLM, body, LONG)
    assert row["error_kind"] == NO_TOKEN_IDS and not row["ok"] and not row["length_exact"]


def test_usage_a_token_past_the_text_stays_ok_but_not_exact():
    """Within what text can hold (a token may decode to nothing), the row passes, marked not exact."""
    row = row_of(TRANSFORMERS, text_stream(["a", " ba", " da", " ga"], usage=5))
    assert row["ok"] and row["completion_tokens"] == 5 and row["retokenized_completion_tokens"] == 4
    assert not row["length_exact"]


def byte_level_bpe() -> Tokenizer:
    """A byte-level BPE of 1000 tokens (a quarter of them single bytes), trained on seeded words with
    characters of 1 to 3 UTF-8 bytes: random ids of it decode to nothing more often than a real model's."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz" * 4 + "éüßñ" + "中文字"
    corpus = [" ".join("".join(rng.choices(letters, k=rng.randint(1, 8))) for _ in range(50)) for _ in range(200)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tokenizer


def test_honest_random_outputs_never_fail_one_token_a_chunk_or_coalesced():
    """What a random-weights model streams: ids drawn at random, each decoded as servers do it
    (incrementally, special tokens skipped, a character's bytes held back until whole), the
    usage counting every id. Its text shows fewer tokens, or more; never few enough to fail."""
    tokenizer = byte_level_bpe()
    rng = random.Random(1)
    shown = []
    for n in [1, 2, 3, 4, 8, 40, 300] * 30:
        stream = decoders.DecodeStream(skip_special_tokens=True)
        pieces = [piece for piece in (stream.step(tokenizer, rng.randrange(tokenizer.get_vocab_size()))
                                      for _ in range(n)) if piece]
        item = replace(ITEM, requested_output_tokens=n)
        for chunks in (pieces, ["".join(pieces)]):
            row = row_of(TRANSFORMERS, text_stream(chunks, usage=n), item, FileTokenizer(tokenizer))
            assert row["ok"], (n, chunks, row["error"])
            shown.append(row["retokenized_completion_tokens"] / n)
    # The draw did meet streams whose text shows far fewer tokens than were generated.
    assert min(shown) == 0


def test_vllm_with_its_token_ids_is_exact():
    ids = b"".join(event({"choices": [{"text": "a", "token_ids": [1]}], "usage": {"completion_tokens": k}})
                   for k in range(1, 6))
    row = row_of(VLLM, ids + b"data: [DONE]\n\n")
    assert row["ok"] and row["length_exact"] and row["retokenized_completion_tokens"] == -1


def test_a_generic_server_is_never_exact_and_a_shorter_answer_is_no_failure():
    short = row_of(OPENAI, text_stream(["a", " ba"], usage=2))
    assert short["ok"] and short["length_mismatch"] and not short["length_forced"] and not short["length_exact"]
    assert (short["planned_output_tokens"], short["completion_tokens"]) == (5, 2)
    assert short["retokenized_completion_tokens"] == 2
    full = row_of(OPENAI, text_stream(["a", " ba", " da", " ga", " a"], usage=5))
    assert full["ok"] and not full["length_mismatch"] and not full["length_exact"]
    assert row_of(OPENAI, text_stream([], usage=0))["error_kind"] == LENGTH_MISMATCH


def test_a_forced_text_stream_that_stops_short_is_a_length_mismatch():
    row = row_of(TRANSFORMERS, text_stream(["a", " ba"], usage=2))
    assert row["error_kind"] == LENGTH_MISMATCH and not row["length_exact"]


def test_transformers_generation_under_that_config_gives_exactly_the_length_in_both_modes():
    """A tiny random model whose own EOS comes first: `generate()` (the sequential mode) and
    the continuous-batching manager (as the server calls them) both still give n tokens."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("fastapi")
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.cli.serving.completion import CompletionHandler
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    torch.manual_seed(0)
    shape = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, num_key_value_heads=2, **shape)).eval()
    prompt = [1, 5, 9, 11]
    model.generation_config.eos_token_id = model.generate(torch.tensor([prompt]), max_new_tokens=1)[0, -1].item()
    handler = object.__new__(CompletionHandler)
    handler.generation_state = SimpleNamespace(_compile=False)

    def config(tokens: int, continuous: bool):
        body = TRANSFORMERS.request_body("m", "x", tokens, "completions")
        return handler._build_generation_config(body, model.generation_config, use_cb=continuous)

    inputs = torch.tensor([prompt])
    assert model.generate(inputs, max_new_tokens=9).shape[1] == len(prompt) + 1
    for tokens in (3, 9):
        assert model.generate(inputs, generation_config=config(tokens, False)).shape[1] == len(prompt) + tokens
    # Small on purpose: unbounded, its cache and masks take 90% of the machine's memory (21.6 GB here),
    # and beside a pooled vLLM server the kernel killed the test process.
    bounded = ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=64)
    manager = model.init_continuous_batching(generation_config=config(3, True), continuous_batching_config=bounded)
    manager.start()
    try:
        for tokens in (3, 9):
            forced = config(tokens, True)
            request = manager.add_request(
                prompt, max_new_tokens=forced.max_new_tokens, eos_token_id=forced.eos_token_id
            )
            assert len(manager.get_result(request_id=request, timeout=60).generated_tokens) == tokens
    finally:
        manager.stop(block=True, timeout=10)


# Other servers: the exact body each is sent, and what its streams are worth. The streams
# follow each server's own chunk code (cited in harness.driver.backends); none is recorded
# from a running server, none of which is installed here.
COMPLETION = {"model": "m", "stream": True, "prompt": "hello there"}
CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
MIN_TOKENS = {"max_tokens": 5, "min_tokens": 5, "ignore_eos": True}
CONTINUOUS = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
USAGE = {"stream_options": {"include_usage": True}}
# Per kind: the fields besides the prompt, on completions and on chat.
BODIES = {
    # SGLang: token ids on completions only; its chat stream has none to give.
    "sglang": ({**MIN_TOKENS, **CONTINUOUS, "return_token_ids": True}, {**MIN_TOKENS, **CONTINUOUS}),
    "tgi": ({"max_tokens": 5, **USAGE},) * 2,
    # llama-server: each sampled token's id in its logprobs; its prompt cache off, as it has no per-run scope.
    "llamacpp": ({"max_tokens": 5, "n_predict": 5, "ignore_eos": True, **USAGE, "n_probs": 1,
                  "post_sampling_probs": True, "cache_prompt": False},) * 2,
    "trtllm": ({**MIN_TOKENS, **CONTINUOUS},) * 2,
}


@pytest.mark.parametrize("name", list(BODIES))
def test_each_other_server_is_sent_exactly_its_length_fields(name: str):
    backend = BACKENDS[name]
    completions, chat = BODIES[name]
    assert backend.request_body("m", "hello there", 5, "completions") == {**COMPLETION, **completions}
    on_chat = backend.for_endpoint("chat")
    assert on_chat.request_body("m", "hello there", 5, "chat") == {**CHAT, **chat}
    # The warm-up asks for its length the same way, unstreamed.
    stream_fields = ("stream_options", "return_token_ids", "n_probs", "post_sampling_probs")
    warm_up = {key: value for key, value in completions.items() if key not in stream_fields}
    salt = {"cache_salt": "bb-warm-up"} if backend.cache_scope_field else {}
    assert backend.warm_up_body("m", "hi", 5) == {"model": "m", "prompt": "hi", **warm_up, **salt}


def test_a_run_scope_goes_only_to_servers_whose_request_models_declare_it():
    """SGLang declares cache_salt on both routes; TensorRT-LLM refuses any field it lacks, and its
    completion request lacks it; TGI and llama-server have none."""
    scope = cache_scope("0a1b")
    for endpoint in ("completions", "chat"):
        assert SGLANG.for_endpoint(endpoint).request_body("m", "x", 5, endpoint, scope)["cache_salt"] == "bb-0a1b"
        assert all("cache_salt" not in kind.for_endpoint(endpoint).request_body("m", "x", 5, endpoint, scope)
                   for kind in (TGI, LLAMACPP, TRTLLM))


def test_only_sglang_talks_differently_on_chat():
    assert SGLANG.asks_token_ids and not SGLANG.retokenizes
    chat = SGLANG.for_endpoint("chat")
    assert chat.name == "sglang" and chat.retokenizes and not chat.asks_token_ids and chat.forces_length
    assert all(kind.for_endpoint("chat") is kind for kind in BACKENDS.values() if kind is not SGLANG)
    assert SGLANG.for_endpoint("completions") is SGLANG


def sglang_ids(n: int) -> bytes:
    """SGLang's completions stream with return_token_ids: each chunk's new ids and the running usage
    (serving_completions.py), then the usage chunk."""
    chunks = b"".join(event({"choices": [{"index": 0, "text": " a", "token_ids": [1], "finish_reason": None}],
                             "usage": {"prompt_tokens": 2, "completion_tokens": k}}) for k in range(1, n + 1))
    return chunks + event({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": n}}) + DONE


def continuous_text(pieces: list[str], chat: bool = False) -> bytes:
    """TensorRT-LLM's or SGLang's chat stream with continuous usage: each chunk's text and running count,
    then the usage chunk (postprocess_handlers.py, serving_chat.py)."""
    def choice(piece: str) -> dict:
        return {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece, "token_ids": None}

    chunks = b"".join(event({"choices": [choice(piece)], "usage": {"prompt_tokens": 2, "completion_tokens": k}})
                      for k, piece in enumerate(pieces, 1))
    return chunks + event({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": len(pieces)}}) + DONE


def tgi_completion(pieces: list[str], usage: int) -> bytes:
    """TGI's completions stream: one token a chunk with an empty finish_reason, the last with the
    usage (server.rs completions)."""
    *body, last = pieces
    chunks = b"".join(event({"choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": ""}]})
                      for piece in body)
    final = {"choices": [{"index": 0, "text": last, "logprobs": None, "finish_reason": "length"}],
             "usage": {"prompt_tokens": 2, "completion_tokens": usage, "total_tokens": 2 + usage}}
    return chunks + event(final) + DONE


def sampled(piece: str) -> dict:
    """llama-server's logprobs of one sampled token, asked for with n_probs 1 and post_sampling_probs
    (server-task.cpp probs_vector_to_json): the id the count reads, its text, its probability."""
    token_id = WORDS.index(piece.strip()) if piece.strip() in WORDS else 1
    entry = {"id": token_id, "token": piece, "bytes": list(piece.encode()), "prob": 0.5}
    return {"content": [{**entry, "top_probs": [entry]}]}


def llamacpp_chat(pieces: list[str], usage: int, ids: bool = True) -> bytes:
    """llama-server's chat stream: a role chunk with null content, one delta a token with its logprobs
    (none with `ids` False: a server that ignored n_probs), the finish chunk, then the usage chunk asked
    for by stream_options (server-task.cpp)."""
    role = event({"choices": [{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": None}}]})
    chunks = b"".join(event({"choices": [{"index": 0, "finish_reason": None, "delta": {"content": piece},
                                          "logprobs": sampled(piece) if ids else None}],
                             "timings": {"predicted_n": k}}) for k, piece in enumerate(pieces, 1))
    finish = event({"choices": [{"index": 0, "finish_reason": "length", "delta": {}}]})
    usage_chunk = event({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": usage}})
    return role + chunks + finish + usage_chunk + DONE


def llamacpp_completion(pieces: list[str], usage: int) -> bytes:
    """llama-server's completions stream, as served here (docs/validation/llama-server.md): one token a
    chunk with its logprobs, then a chunk with no text, the finish_reason and the usage."""
    chunks = b"".join(event({"choices": [{"text": piece, "index": 0, "logprobs": sampled(piece),
                                          "finish_reason": None}], "object": "text_completion"})
                      for piece in pieces)
    final = {"choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
             "usage": {"completion_tokens": usage, "prompt_tokens": 2, "total_tokens": 2 + usage}}
    return chunks + event(final) + DONE


DONE = b"data: [DONE]\n\n"
FIVE = ["a", " ba", " da", " ga", " a"]


def test_sglang_completions_are_counted_by_their_token_ids():
    row = row_of(SGLANG, sglang_ids(5))
    assert row["ok"] and row["length_exact"] and row["completion_tokens"] == 5
    assert row["retokenized_completion_tokens"] == -1
    # An SGLang without return_token_ids ignores the field: its stream fails, not counted from usage.
    assert row_of(SGLANG, continuous_text(FIVE))["error_kind"] == NO_TOKEN_IDS


def test_llama_server_is_counted_by_the_ids_in_its_logprobs_a_special_token_included():
    """A generated BOS streams as no text: the ids count it, where re-tokenising the text came one short
    (seen on the real server, docs/validation/llama-server.md)."""
    with_bos = ["a", " ba", "", " ga", " a"]
    for body in (llamacpp_completion(with_bos, 5), llamacpp_chat(with_bos, 5)):
        row = row_of(LLAMACPP, body)
        assert row["ok"] and row["length_exact"] and row["completion_tokens"] == 5
        assert row["retokenized_completion_tokens"] == -1
    assert len(words().encode("a ba ga a", add_special_tokens=False)) == 4
    # A llama-server that ignored n_probs sends no ids: its rows fail, not counted from usage.
    assert row_of(LLAMACPP, llamacpp_chat(FIVE, 5, ids=False))["error_kind"] == NO_TOKEN_IDS
    # Its usage is checked against the ids, as vLLM's is.
    assert row_of(LLAMACPP, llamacpp_completion(FIVE, 6))["error_kind"] == USAGE_MISMATCH


def test_text_streams_of_forcing_servers_are_exact_where_all_counts_agree():
    for backend, body in ((SGLANG.for_endpoint("chat"), continuous_text(FIVE, chat=True)),
                          (TRTLLM, continuous_text(FIVE))):
        row = row_of(backend, body)
        assert row["ok"] and row["length_forced"] and row["length_exact"], backend.name
        assert (row["completion_tokens"], row["usage_completion_tokens"], row["retokenized_completion_tokens"]) == (
            5, 5, 5)


@pytest.mark.parametrize("arrived", [3, 7])
def test_a_forcing_server_that_ignores_the_length_is_a_length_mismatch(arrived: int):
    """A server that took the fields but stopped at EOS (or ran past the cap): short or long, the row fails."""
    words = (FIVE * 2)[:arrived]
    for backend, body in ((SGLANG, sglang_ids(arrived)), (SGLANG.for_endpoint("chat"), continuous_text(words, True)),
                          (TRTLLM, continuous_text(words)), (LLAMACPP, llamacpp_chat(words, arrived))):
        row = row_of(backend, body)
        assert row["error_kind"] == LENGTH_MISMATCH and not row["ok"] and not row["length_exact"], backend.name
        assert row["error"] == f"{arrived} tokens arrived, 5 were asked for"


def test_a_forcing_server_whose_usage_claims_the_length_beside_shorter_text_is_not_exact():
    """Text of 3 tokens and a usage of 5: within what text can hold, so ok, but not exact."""
    row = row_of(TRTLLM, text_stream(FIVE[:3], 5))
    assert row["ok"] and row["completion_tokens"] == 5 and row["retokenized_completion_tokens"] == 3
    assert not row["length_exact"]


def test_tgi_cannot_force_the_length_so_no_row_of_it_is_exact():
    full = row_of(TGI, tgi_completion(FIVE, 5))
    assert full["ok"] and not full["length_mismatch"] and not full["length_forced"] and not full["length_exact"]
    assert (full["completion_tokens"], full["retokenized_completion_tokens"]) == (5, 5)
    # Stopped at its EOS: no failure, but the row says its length differs from the plan.
    short = row_of(TGI, tgi_completion(FIVE[:2], 2))
    assert short["ok"] and short["length_mismatch"] and short["completion_tokens"] == 2


def tokenize_server(answer: str) -> type[BaseHTTPRequestHandler]:
    """A /tokenize of llama-server's shape: {"content", "add_special"} in, the ids out, a BOS first
    only where add_special asks for it (server-context.cpp post_tokenize); `answer` "count" answers
    vLLM's {"count"} to {"model", "prompt"} instead, and "neither" an answer with no count."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = request.get("content", request.get("prompt", ""))
            ids = [WORDS.index(word) if word in WORDS else 0 for word in text.split()]
            body: dict[str, int | list[int]]
            if answer == "count":
                body = {"count": len(ids)} if "model" in request else {}
            elif answer == "neither":
                body = {"ids": ids}
            else:
                body = {"tokens": [1] * request.get("add_special", False) + ids}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    return Handler


def test_llama_server_counts_a_prompt_by_its_ids_with_the_special_tokens_a_completion_adds(serve_locally):
    with serve_locally(tokenize_server("tokens")) as url:
        count = server_token_counter(EndpointInfo(url, "m", None, None), {}, LLAMACPP)
        assert count is not None and count("ba da ga") == 4
    with serve_locally(tokenize_server("count")) as url:
        count = server_token_counter(EndpointInfo(url, "m", None, None), {}, VLLM)
        assert count is not None and count("ba da ga") == 3
    with serve_locally(tokenize_server("neither")) as url:
        count = server_token_counter(EndpointInfo(url, "m", None, None), {}, LLAMACPP)
        assert count is not None
        with pytest.raises(UsageError, match="neither a count nor tokens"):
            count("ba")
