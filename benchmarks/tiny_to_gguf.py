"""The tiny model (or any model directory `prepare-model` makes with weights) written as GGUF for llama.cpp.

The architecture is `llama`, every tensor F32, the weights those of the safetensors file, with
the query and key projections permuted from Hugging Face's rotary layout to GGML's, as
llama.cpp's own converter does (conversion/llama.py, `LlamaModel.permute`).

The tokenizer is the model's WordLevel one (launchers.models: one made-up word a token, split
on whitespace, no BOS added), written as llama.cpp's Unigram kind (`tokenizer.ggml.model`
"t5"), every word spelt "▁" + word: the text's runs of whitespace become one "▁" before each
word, and since every token opens with "▁" and holds no other, the only spelling of a text
in tokens is word by word, each word whole. A token decodes as " " + word. So llama-server
counts a prompt's tokens as the Hugging Face tokenizer does, and its streamed text
re-tokenises to the tokens it generated. The kind's defaults are overridden with the
model's own: no BOS or EOS added, BOS 1, EOS 2, unknown 0. Two kinds that look closer do
not fit: WordPiece (`bert`) looks words up whole too, but adds a BOS and a separator around
every prompt whatever the file says (src/llama-vocab.cpp), two tokens the plan does not
count; BPE (`gpt2`) with no merges spells every word letter by letter, none a token here.

    .venv/bin/python benchmarks/tiny_to_gguf.py OUT.gguf [--model tiny] [--gguf-py DIR]

`--gguf-py` is the `gguf-py` directory of a llama.cpp source tree (the `gguf` package is not
a dependency of this project); without it, `gguf` must be importable.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from launchers.models import resolve_model

# llama.cpp's Unigram tokenizer writes a space as this character (U+2581).
WORD_START = "\u2581"


def load_gguf(gguf_py: Path | None) -> ModuleType:
    """The `gguf` package, from `gguf_py` where given."""
    if gguf_py is not None:
        sys.path.insert(0, str(gguf_py))
    return importlib.import_module("gguf")


def rope_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """A q or k projection's rows reordered from Hugging Face's rotary halves to GGML's interleaved pairs."""
    rows = weights.shape[0]
    return weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def vocabulary(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int], int]:
    """Token texts and types by id, in llama.cpp's Unigram spelling, and the unknown token's id.

    Raises ValueError for a tokenizer that is not WordLevel or does not cover every id.
    """
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    if tokenizer["model"]["type"] != "WordLevel":
        raise ValueError(f"{model_dir}: a {tokenizer['model']['type']} tokenizer; only WordLevel is written")
    special = {added["content"] for added in tokenizer["added_tokens"] if added["special"]}
    by_id = {token_id: word for word, token_id in tokenizer["model"]["vocab"].items()}
    if sorted(by_id) != list(range(vocab_size)):
        raise ValueError(f"{model_dir}: the tokenizer does not hold exactly the ids 0..{vocab_size - 1}")
    unk_word = tokenizer["model"]["unk_token"]
    texts: list[str] = []
    types: list[int] = []
    for token_id in range(vocab_size):
        word = by_id[token_id]
        if word == unk_word:
            texts.append(word)
            types.append(2)  # UNKNOWN
        elif word in special:
            texts.append(word)
            types.append(3)  # CONTROL
        else:
            texts.append(WORD_START + word)
            types.append(1)  # NORMAL
    return texts, types, tokenizer["model"]["vocab"][unk_word]


def tensors(model_dir: Path, config: dict[str, Any]) -> dict[str, np.ndarray]:
    """The model's weights by Hugging Face name, float32, q and k permuted for GGML's rotary layout."""
    weights = load_file(str(model_dir / "model.safetensors"))
    out: dict[str, np.ndarray] = {}
    for name, array in weights.items():
        array = array.astype(np.float32)
        if name.endswith("self_attn.q_proj.weight"):
            array = rope_permute(array, config["num_attention_heads"])
        elif name.endswith("self_attn.k_proj.weight"):
            array = rope_permute(array, config["num_key_value_heads"])
        out[name] = array
    return out


def write(model_dir: Path, out: Path, gguf: ModuleType) -> None:
    """Write `model_dir` (a Llama with a WordLevel tokenizer) to `out` as a GGUF file."""
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ValueError(f"{model_dir}: model_type {config.get('model_type')!r}; only llama is written")
    layers = config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config.get("rope_parameters") or {"rope_theta": config["rope_theta"]}
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_name(model_dir.name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(config["vocab_size"])

    texts, types, unknown = vocabulary(model_dir, config["vocab_size"])
    writer.add_tokenizer_model("t5")
    writer.add_token_list(texts)
    writer.add_token_types(types)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_unk_token_id(unknown)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    # "▁" before each word, however many spaces stood there (the WhitespaceSplit of the Hugging Face tokenizer).
    writer.add_add_space_prefix(True)
    writer.add_remove_extra_whitespaces(True)
    template = model_dir / "chat_template.jinja"
    if template.exists():
        writer.add_chat_template(template.read_text())

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)
    for hf_name, array in tensors(model_dir, config).items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"{model_dir}: no GGUF name for tensor {hf_name}")
        writer.add_tensor(name, array)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the GGUF file to write")
    parser.add_argument("--model", default="tiny", help="a model profile with weights, or its directory (default tiny)")
    parser.add_argument("--gguf-py", type=Path, help="llama.cpp's gguf-py directory, where `gguf` is not installed")
    args = parser.parse_args()
    model_dir = Path(resolve_model(args.model).path)
    write(model_dir, args.out, load_gguf(args.gguf_py))
    print(f"{model_dir} -> {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
