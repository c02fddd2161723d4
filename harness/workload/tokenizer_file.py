"""A prompt tokenizer read straight from a model directory's tokenizer.json, without torch.

transformers 5 imports torch as soon as AutoTokenizer is imported (its generation package
does), and torch is hundreds of MB resident in every process that builds prompts
(docs/validation/client-ceiling.md). The `tokenizers` library, the Rust core under
transformers' fast tokenizers, reads the same tokenizer.json without torch and encodes and
decodes it the same way. Directories it cannot serve alike (no
tokenizer.json, or a config asking transformers to post-edit decoded text) keep loading
through transformers (harness.driver.endpoint.load_tokenizer); and a run checks every
prompt's count with the server's own /tokenize whenever the server has one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
# tokenizer_config keys under which transformers edits what the tokenizer.json produces.
_POST_EDITS = ("clean_up_tokenization_spaces", "add_bos_token", "add_eos_token", "add_prefix_space")


class FileTokenizer:
    """harness.workload.TokenizerLike over a `tokenizers.Tokenizer`, as transformers' fast tokenizer answers."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=False)

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(index for index, token in self._tokenizer.get_added_tokens_decoder().items() if token.special)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, token_ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def batch_decode(self, sequences: Sequence[Sequence[int]]) -> list[str]:
        return self._tokenizer.decode_batch([list(ids) for ids in sequences], skip_special_tokens=False)


def file_tokenizer(directory: Path) -> FileTokenizer | None:
    """The directory's tokenizer.json as a FileTokenizer, or None where transformers would answer otherwise."""
    path = directory / TOKENIZER_FILE
    if not path.is_file():
        return None
    config_path = directory / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or any(config.get(key) for key in _POST_EDITS):
        return None
    try:
        return FileTokenizer(Tokenizer.from_file(str(path)))
    except Exception:  # noqa: BLE001 - any file tokenizers cannot read is left to transformers
        return None
