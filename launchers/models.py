"""Model directories that need no download.

Three kinds of model argument are normalised into one `ResolvedModel`:
- `tiny`: a small Llama with random weights and a locally built tokenizer, made here
  from a seed (the CPU default);
- an architecture profile (`llama-3.1-8b`, `opt-13b`): the real config.json and a
  tokenizer of the right vocabulary size, no weights; vLLM runs it with
  `--load-format dummy`, which costs what the real model costs on a GPU;
- anything else: a local directory or a hub id, passed to vLLM unchanged.

A profile takes one option, `PROFILE:layers=N`: the same model with only its first N
decoder layers (vocabulary, heads, GQA and dtype unchanged), so a GPU model's real
shapes fit a CPU. The option is part of the model argument, so it travels through
every command that takes one. On the CPU build a 16-bit profile is served in float32
where the CPU has no instructions for its dtype (launchers.cpu_dtype).

Made directories are cached under `BATCHBENCH_CACHE` (default ~/.cache/batchbench),
named by a hash of everything that shapes them, and written atomically.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.paper.model_configs import LLAMA_3_1_8B_CONFIG, OPT_13B_CONFIG
from harness.settings import Settings, export
from launchers.cpu_dtype import cpu_flags, cpu_serving_dtype
from launchers.server_files import compile_cache_env

TINY_SEED = 20231
_SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# A layer count as written in `PROFILE:layers=N`: no sign, no leading zero, ASCII digits.
_LAYER_COUNT = re.compile(r"[1-9][0-9]*")
# The longest context a profile is served with on the CPU build: the longest CPU
# workload (512-token prompts + outputs capped at 1536) fits. A profile's own limit
# (131,072 for Llama-3.1-8B) needs more KV cache than the CPU default of 1 GiB holds
# from two layers on (one in float32), and vLLM refuses to start when one maximal
# request does not fit. `--vllm-arg=--max-model-len N` overrides it (the last flag wins).
CPU_MAX_MODEL_LEN = 4096


@dataclass(frozen=True)
class ModelProfile:
    """A model made locally: its config.json contents and whether weights are written."""

    name: str
    config: dict[str, Any]
    dtype: str
    with_weights: bool
    description: str

    @property
    def layers(self) -> int:
        """Decoder layers in this profile's config."""
        return int(self.config["num_hidden_layers"])

    def with_layers(self, layers: int) -> ModelProfile:
        """This profile with only its first `layers` decoder layers; every other shape unchanged."""
        return replace(self, config={**self.config, "num_hidden_layers": layers})


TINY = ModelProfile(
    name="tiny",
    config={
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
        # Room for the longest CPU workload: prompt + capped output.
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    },
    dtype="float32",
    with_weights=True,
    description="4-layer Llama, hidden 256, random weights (CPU default)",
)

LLAMA_3_1_8B = ModelProfile(
    name="llama-3.1-8b",
    config=LLAMA_3_1_8B_CONFIG,
    dtype="bfloat16",
    with_weights=False,
    description="Llama-3.1-8B shapes, dummy weights (GPU: --load-format dummy)",
)

OPT_13B = ModelProfile(
    name="opt-13b",
    config=OPT_13B_CONFIG,
    dtype="float16",
    with_weights=False,
    description="OPT-13B shapes (the Anyscale model), dummy weights",
)

PROFILES: dict[str, ModelProfile] = {p.name: p for p in (TINY, LLAMA_3_1_8B, OPT_13B)}


@dataclass(frozen=True)
class ResolvedModel:
    """What the launcher passes to vLLM for a model argument.

    `profile` and `layers` say which built-in profile runs and with how many decoder
    layers (None for a directory or hub id). On the CPU build, `cpu_dtype` replaces
    `dtype` (launchers.cpu_dtype: float32 where this CPU has no instructions for the
    profile's 16-bit dtype) and `cpu_max_model_len` caps a context its KV cache cannot hold.
    """

    argument: str
    path: str
    load_format: str
    dtype: str | None
    profile: str | None
    layers: int | None = None
    cpu_dtype: str | None = None
    cpu_max_model_len: int | None = None

    def served_dtype(self, cpu: bool = False) -> str | None:
        """The dtype vLLM is told to use (`cpu`: on the CPU build); None: the model's own."""
        return self.cpu_dtype if cpu and self.cpu_dtype is not None else self.dtype

    def vllm_args(self, cpu: bool = False) -> list[str]:
        """The vLLM CLI arguments that select this model (`cpu`: for the CPU build)."""
        args = ["--model", self.path]
        if self.load_format != "auto":
            args += ["--load-format", self.load_format]
        dtype = self.served_dtype(cpu)
        if dtype is not None:
            args += ["--dtype", dtype]
        if cpu and self.cpu_max_model_len is not None:
            args += ["--max-model-len", str(self.cpu_max_model_len)]
        return args

    def summary(self, cpu: bool = False) -> str:
        """One line saying what runs: profile, layers kept, dtype and any context cap (`cpu`: CPU build)."""
        if self.profile is None:
            return f"{self.path}, shapes and dtype as vLLM reads them"
        parts = [f"profile {self.profile}", f"{self.layers} of {PROFILES[self.profile].layers} layers"]
        dtype = self.served_dtype(cpu)
        if dtype == self.dtype:
            parts.append(f"dtype {dtype}")
        else:
            parts.append(f"dtype {dtype} (this CPU has no {self.dtype} instructions)")
        if cpu and self.cpu_max_model_len is not None:
            parts.append(f"max-model-len {self.cpu_max_model_len} (CPU KV cache)")
        return ", ".join(parts)


def cache_root() -> Path:
    """Where made models live (BATCHBENCH_CACHE or ~/.cache/batchbench, see harness.settings)."""
    return Settings.from_env().cache_dir


def resolve_model(argument: str, seed: int = TINY_SEED) -> ResolvedModel:
    """Turn a model argument into a directory or hub id vLLM can load, making it if needed.

    Raises UsageError for a path that does not exist, an unknown name, or a bad
    `PROFILE:layers=N` option.
    """
    chosen = parse_profile_argument(argument)
    if chosen is not None:
        path = prepare_profile(chosen, seed)
        positions = int(chosen.config["max_position_embeddings"])
        return ResolvedModel(
            argument=argument,
            path=str(path),
            load_format="auto" if chosen.with_weights else "dummy",
            dtype=chosen.dtype,
            profile=chosen.name,
            layers=chosen.layers,
            cpu_dtype=cpu_serving_dtype(chosen.dtype, cpu_flags()),
            cpu_max_model_len=CPU_MAX_MODEL_LEN if positions > CPU_MAX_MODEL_LEN else None,
        )
    expanded = Path(argument).expanduser()
    if expanded.is_dir():
        return ResolvedModel(argument, str(expanded.resolve()), "auto", None, None)
    looks_like_path = argument.startswith(("/", ".", "~")) or expanded.exists()
    if not looks_like_path and _HUB_ID.match(argument):
        return ResolvedModel(argument, argument, "auto", None, None)
    known = ", ".join(PROFILES)
    if looks_like_path:
        raise UsageError(f"model path does not exist or is not a directory: {argument}")
    raise UsageError(
        f"unknown model {argument!r}: use one of {known} (a profile may cut its layers: PROFILE:layers=N),"
        " a local directory or a hub id"
    )


def parse_profile_argument(argument: str) -> ModelProfile | None:
    """The profile `PROFILE` or `PROFILE:layers=N` names (layers cut), or None if it names no profile.

    Raises UsageError, in one line, for an option other than `layers=N` or an N that is
    not a whole number from 1 to the profile's own layer count.
    """
    name, has_option, option = argument.partition(":")
    profile = PROFILES.get(name)
    if profile is None:
        return None
    if not has_option:
        return profile
    key, has_value, value = option.partition("=")
    if key != "layers" or not has_value:
        raise UsageError(
            f"bad model option {option!r} in {argument!r}: the only option is layers=N, e.g. {name}:layers=2"
        )
    if not _LAYER_COUNT.fullmatch(value) or int(value) > profile.layers:
        raise UsageError(f"bad layer count {value!r} in {argument!r}: use a whole number from 1 to {profile.layers}")
    return profile.with_layers(int(value))


def prepare_profile(profile: ModelProfile, seed: int = TINY_SEED) -> Path:
    """Make (or reuse) the directory of a built-in profile and return its path.

    The name hashes everything that shapes the directory, the layer count included, so
    a profile with layers cut never shares the full profile's directory.
    """
    key = json.dumps({"config": profile.config, "seed": seed, "weights": profile.with_weights}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    full = PROFILES.get(profile.name)
    cut = full is not None and full.layers != profile.layers
    label = f"{profile.name}-{profile.layers}layers" if cut else profile.name
    target = cache_root() / "models" / f"{label}-{digest}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{profile.name}-", dir=target.parent))
    try:
        _write_model(profile, seed, staging)
        (staging / ".complete").write_text(key)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_model(profile: ModelProfile, seed: int, directory: Path) -> None:
    config = dict(profile.config)
    _tokenizer(config["vocab_size"], config["bos_token_id"], config["eos_token_id"]).save_pretrained(directory)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    if profile.with_weights:
        _write_random_weights(config, seed, directory)


def _write_random_weights(config: dict[str, Any], seed: int, directory: Path) -> None:
    # torch would make its compile cache in the temp dir and leave it there; the harness's cache holds it, as it
    # does for a launched server (set before torch is first imported, which reads it once).
    settings = Settings.from_env()
    export(compile_cache_env(settings.cache_dir, settings.environ))
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    hf_config = AutoConfig.from_pretrained(directory)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=getattr(torch, config["torch_dtype"]))
    model.save_pretrained(directory, safe_serialization=True)


def _tokenizer(vocab_size: int, bos_id: int, eos_id: int):
    """A WordLevel tokenizer with exactly `vocab_size` entries and the config's BOS/EOS ids.

    Words are made-up syllable strings, one token each, so a prompt of n words is
    n tokens; BOS is not added by the tokenizer, so prompt lengths are exact.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    specials = {bos_id: "<s>", eos_id: "</s>"}
    unk_id = next(i for i in range(vocab_size) if i not in specials)
    specials[unk_id] = "<unk>"
    words = _words()
    for token_id in range(vocab_size):
        vocab[specials.get(token_id) or next(words)] = token_id
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.chat_template = _CHAT_TEMPLATE
    return tokenizer


def _words():
    """An endless, deterministic stream of distinct pronounceable words."""
    consonants = "bcdfghjklmnprstvz"
    vowels = "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    length = 1
    while True:
        for index in range(len(syllables) ** length):
            word = ""
            for _ in range(length):
                index, rest = divmod(index, len(syllables))
                word += syllables[rest]
            yield word
        length += 1
