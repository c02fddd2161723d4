"""Exact-length prompts under small real tokenizers (built in conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import PreTrainedTokenizerFast

from harness.errors import UsageError
from harness.workload import (
    BurstArrival,
    FixedLength,
    PromptFactory,
    UniformLength,
    WorkloadSpec,
    build_plan,
    make_prompts,
)


def count(tokenizer: PreTrainedTokenizerFast, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=True))


def test_prompts_have_exact_counts_including_special_tokens(tokenizer):
    factory = PromptFactory(tokenizer, seed=0)
    bos = tokenizer.encode("", add_special_tokens=True)
    for n in [*range(len(bos) + 1, 40), 64, 127, 512]:
        text = factory.make(n, index=n)
        assert count(tokenizer, text) == n
        assert tokenizer.encode(text, add_special_tokens=True)[: len(bos)] == bos


def test_bos_counts_towards_the_length(small_tokenizers):
    tokenizer = small_tokenizers["wordlevel+bos"]()
    text = PromptFactory(tokenizer, seed=0).make(10, index=0)
    assert len(text.split()) == 9
    assert tokenizer.encode(text)[0] == tokenizer.bos_token_id


def test_bpe_re_encoding_really_moves_counts(bpe):
    """Guards the test above: naive decode of random ids must not already be exact."""
    special = set(bpe.all_special_ids)
    pool = [i for i in range(bpe.vocab_size) if i not in special]
    rng = np.random.default_rng(0)
    moved = sum(
        count(bpe, bpe.decode(rng.choice(pool, 50).tolist())) != 50 for _ in range(20)
    )
    assert moved >= 10


def test_prompts_use_no_special_tokens(tokenizer):
    special = set(tokenizer.all_special_ids)
    factory = PromptFactory(tokenizer, seed=1)
    for index in range(20):
        body = tokenizer.encode(factory.make(48, index), add_special_tokens=False)
        assert not special & set(body)


def test_prompts_are_deterministic_and_differ_between_requests(tokenizer):
    first = [PromptFactory(tokenizer, seed=3).make(32, i) for i in range(30)]
    again = [PromptFactory(tokenizer, seed=3).make(32, i) for i in range(30)]
    other_seed = [PromptFactory(tokenizer, seed=4).make(32, i) for i in range(30)]
    assert first == again
    assert all(a != b for a, b in zip(first, other_seed, strict=True))
    # Distinct from the first tokens on, so no shared prefix for a prefix cache to reuse.
    heads = {tuple(tokenizer.encode(text, add_special_tokens=False)[:4]) for text in first}
    assert len(heads) == len(first)


def test_make_prompts_follows_the_plan(bpe):
    spec = WorkloadSpec(
        name="p",
        seed=9,
        num_requests=25,
        prompt_tokens=UniformLength(mean=40, spread=0.9),
        output_tokens=FixedLength(value=1),
        arrival=BurstArrival(),
    )
    plan = build_plan(spec)
    prompts = make_prompts(plan, bpe)
    assert [count(bpe, p) for p in prompts] == [r.prompt_tokens for r in plan.requests]
    assert prompts == make_prompts(plan, bpe)


def test_verify_agreeing_passes_and_disagreeing_is_a_usage_error(bpe):
    calls: list[str] = []

    def agree(text: str) -> int:
        calls.append(text)
        return count(bpe, text)

    text = PromptFactory(bpe, seed=0, verify=agree).make(20, 0)
    assert calls == [text]
    off_by_one = PromptFactory(bpe, seed=0, verify=lambda text: count(bpe, text) + 1)
    with pytest.raises(UsageError, match=r"prompt length 20: the verifier counts 21 tokens"):
        off_by_one.make(20, 0)


def test_length_with_no_room_for_text_is_a_usage_error(small_tokenizers):
    factory = PromptFactory(small_tokenizers["wordlevel+bos"](), seed=0)
    with pytest.raises(UsageError, match=r"prompt length 1: the tokenizer adds 1 special"):
        factory.make(1, 0)
    plain = small_tokenizers["wordlevel"]()
    assert count(plain, PromptFactory(plain, 0).make(1, 0)) == 1


class DoublingTokenizer:
    """Every word encodes to two tokens, so odd counts are unreachable."""

    vocab_size = 10
    all_special_ids: list[int] = []

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [int(word[1:]) for word in text.split() for _ in range(2)]

    def decode(self, token_ids) -> str:
        # One word per pair, so decode(encode(text)) == text as in a real tokenizer.
        return " ".join(f"w{i}" for i in token_ids[::2])

    def batch_decode(self, sequences) -> list[str]:
        return [self.decode(ids) for ids in sequences]


def test_unreachable_length_fails_after_bounded_attempts():
    factory = PromptFactory(DoublingTokenizer(), seed=0)
    assert len(DoublingTokenizer().encode(factory.make(6, 0))) == 6
    with pytest.raises(UsageError, match=r"prompt length 7: no text of exactly that many tokens"):
        factory.make(7, 0)


def test_requests_that_share_blocks_share_those_tokens_and_no_more(tokenizer):
    """Mooncake-style hash ids: equal ids open the prompts with equal tokens; the rest is each request's own."""
    factory = PromptFactory(tokenizer, seed=3)
    block = 16
    first = tokenizer.encode(factory.from_blocks(["7", "8", "9"], block, 60, index=0))
    second = tokenizer.encode(factory.from_blocks(["7", "8", "4"], block, 70, index=1))
    other = tokenizer.encode(factory.from_blocks(["5"], block, 40, index=2))
    assert (len(first), len(second), len(other)) == (60, 70, 40)
    common = next(k for k, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    # BOS and two 16-token blocks, give or take a token merged where a block meets the next.
    assert 1 + 2 * block - 2 <= common <= 1 + 2 * block + 1
    assert first[1:4] != other[1:4]
    # The same block under another seed is other text: a block's tokens are the seed's and the id's.
    assert tokenizer.encode(PromptFactory(tokenizer, seed=4).from_blocks(["7"], block, 20, 0))[:17] != first[:17]


def test_a_shared_prefix_opens_every_prompt_of_its_group(tokenizer):
    spec = WorkloadSpec(name="system-prompt", seed=1, num_requests=6, prompt_tokens=FixedLength(value=50),
                        output_tokens=FixedLength(value=4), arrival=BurstArrival(),
                        shared_prefix={"tokens": 24, "groups": 2})
    plan = build_plan(spec)
    ids = [tokenizer.encode(text) for text in make_prompts(plan, tokenizer)]
    assert all(len(i) == 50 for i in ids)
    assert ids[0][:24] == ids[2][:24] == ids[4][:24] and ids[1][:24] == ids[3][:24]
    assert ids[0][:5] != ids[1][:5] and ids[0][30:] != ids[2][30:]
