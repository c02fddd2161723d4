"""Small real tokenizers (tokenizers + transformers, built here, nothing downloaded) for the workload tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<unk>", "<s>", "</s>"]
WORDS = [f"{a}{b}{c}" for a in "bcdfgklmnp" for b in "aeiou" for c in "rstlnmkgpd"]  # 500


def wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def add_bos(tokenizer: Tokenizer) -> None:
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
    )


def word_level(bos: bool) -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:
        add_bos(tokenizer)
    return wrap(tokenizer)


def byte_level_bpe(bos: bool) -> PreTrainedTokenizerFast:
    """GPT-2 style BPE: decoding joins pieces without spaces, so re-encoding merges them
    differently and the count moves, which is what the adjustment loop must handle."""
    rng = np.random.default_rng(0)
    corpus = [" ".join(rng.choice(WORDS, 12)) for _ in range(300)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    if bos:
        add_bos(tokenizer)
    return wrap(tokenizer)


TOKENIZERS = {
    "wordlevel": lambda: word_level(bos=False),
    "wordlevel+bos": lambda: word_level(bos=True),
    "bpe": lambda: byte_level_bpe(bos=False),
    "bpe+bos": lambda: byte_level_bpe(bos=True),
}


@pytest.fixture(scope="module", params=list(TOKENIZERS), ids=list(TOKENIZERS))
def tokenizer(request) -> PreTrainedTokenizerFast:
    return TOKENIZERS[request.param]()


@pytest.fixture(scope="module")
def bpe() -> PreTrainedTokenizerFast:
    return byte_level_bpe(bos=False)


@pytest.fixture(scope="session")
def small_tokenizers() -> dict[str, Callable[[], PreTrainedTokenizerFast]]:
    """Each small tokenizer's builder, by name."""
    return TOKENIZERS
