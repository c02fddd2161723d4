"""Prompt text with an exact token count under the server's tokenizer.

The count is `len(tokenizer.encode(text, add_special_tokens=True))`, the way vLLM's
completions endpoint counts a prompt, so a BOS token the tokenizer adds is included.
Text is random vocabulary tokens drawn from a stream keyed by (seed, request index), so
every request's prompt differs from the first token on and a prefix cache cannot make
one request's prefill free because of another's. The exception is a plan whose requests
share prefix blocks (harness.workload.prefixes): a block's tokens are drawn from a stream
keyed by (seed, block id) alone, so every request that carries the block opens with them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from harness.errors import UsageError
from harness.workload.plan import RequestPlan
from harness.workload.prefixes import prefix_blocks

# SeedSequence child keys for prompt text and shared prefix blocks; plan.py uses keys 0-2 for the plan's columns.
PROMPT_TEXT_STREAM = 3
PREFIX_BLOCK_STREAM = 4

# Decode/re-encode rounds before giving up on a length. Re-encoding merges or splits
# tokens at the edges of what was added or cut, so a round usually lands within a
# token or two and a handful of rounds suffices.
MAX_ADJUSTMENTS = 32


class TokenizerLike(Protocol):
    """The parts of a `transformers` tokenizer that prompt building uses."""

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (ids 0..vocab_size-1, added tokens excluded)."""

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of special tokens (BOS, EOS, UNK, ...), never used in prompt text."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`."""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of `token_ids`."""

    def batch_decode(self, sequences: Sequence[Sequence[int]]) -> list[str]:
        """Text of each id sequence."""


class PromptFactory:
    """Makes prompt texts of exact token counts, deterministic in (tokenizer, seed, index)."""

    def __init__(
        self,
        tokenizer: TokenizerLike,
        seed: int,
        verify: Callable[[str], int] | None = None,
    ) -> None:
        """`verify`, if given, counts a finished prompt independently (e.g. the server's
        /tokenize); a disagreement with the local count raises `UsageError`."""
        self._tokenizer = tokenizer
        self._seed = seed
        self._verify = verify
        self._pool = _text_token_pool(tokenizer)
        # Tokens the tokenizer adds around any text (e.g. BOS): part of every count.
        self._overhead = len(tokenizer.encode("", add_special_tokens=True))
        self._blocks: dict[tuple[str, int], list[int]] = {}

    def make(self, n_tokens: int, index: int) -> str:
        """Text that encodes to exactly `n_tokens` tokens, special tokens included.

        Raises `UsageError` if `n_tokens` leaves no room for text after the special
        tokens, or if no text of that length is found within `MAX_ADJUSTMENTS` rounds.
        """
        if n_tokens <= self._overhead:
            raise UsageError(
                f"prompt length {n_tokens}: the tokenizer adds {self._overhead} special"
                " token(s), so a prompt needs more than that to hold any text"
            )
        rng = self._rng(index)
        return self._fit(self._draw(rng, n_tokens - self._overhead), n_tokens, index, rng)

    def extend(self, prefix: str, n_tokens: int, index: int) -> str:
        """`prefix` (a conversation's earlier turns), then new text, exactly `n_tokens` tokens in all.

        The new text stands for the previous turn's answer and this turn's question: random
        tokens, as every prompt's text is. Raises `UsageError` as `make` does, or if `prefix`
        alone holds `n_tokens` tokens or more.
        """
        held = len(self._tokenizer.encode(prefix, add_special_tokens=True))
        if n_tokens <= held:
            raise UsageError(f"prompt length {n_tokens}: its earlier turns alone hold {held} tokens (request {index})")
        rng = self._rng(index)
        ids = self._tokenizer.encode(prefix, add_special_tokens=False) + self._draw(rng, n_tokens - held)
        return self._fit(ids, n_tokens, index, rng)

    def from_blocks(self, blocks: Sequence[str], block_tokens: int, n_tokens: int, index: int) -> str:
        """Text of exactly `n_tokens` tokens that opens with the tokens of `blocks`, then the request's own.

        A block's tokens depend on the seed and its id alone, so two requests that carry the
        same leading blocks share that text (the tokenizer may merge a token or two where a
        block meets the next). Raises `UsageError` as `make` does.
        """
        if n_tokens <= self._overhead:
            return self.make(n_tokens, index)
        room = n_tokens - self._overhead
        ids = [token for block in blocks for token in self._block(block, block_tokens)][:room]
        rng = self._rng(index)
        return self._fit(ids + self._draw(rng, room - len(ids)), n_tokens, index, rng)

    def _block(self, block: str, block_tokens: int) -> list[int]:
        key = (block, block_tokens)
        if key not in self._blocks:
            digest = int.from_bytes(hashlib.sha256(block.encode()).digest()[:8], "big")
            rng = np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(PREFIX_BLOCK_STREAM, digest)))
            self._blocks[key] = self._draw(rng, block_tokens)
        return self._blocks[key]

    def _rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(PROMPT_TEXT_STREAM, index)))

    def _fit(self, ids: list[int], n_tokens: int, index: int, rng: np.random.Generator) -> str:
        """The text of `ids`, cut or extended at its end until it encodes to exactly `n_tokens` tokens."""
        for _ in range(MAX_ADJUSTMENTS):
            text = self._tokenizer.decode(ids)
            count = len(self._tokenizer.encode(text, add_special_tokens=True))
            if count == n_tokens:
                self._check(text, n_tokens, index)
                return text
            # Continue from the canonical tokenization, which re-encodes to itself, so
            # only the edit at the end can move the count.
            ids = self._tokenizer.encode(text, add_special_tokens=False)
            if count > n_tokens:
                ids = ids[: max(len(ids) - (count - n_tokens), 0)]
            else:
                ids = ids + self._draw(rng, n_tokens - count)
        raise UsageError(
            f"prompt length {n_tokens}: no text of exactly that many tokens found in"
            f" {MAX_ADJUSTMENTS} attempts (request {index})"
        )

    def _draw(self, rng: np.random.Generator, n: int) -> list[int]:
        ids: list[int] = rng.choice(self._pool, size=n).tolist()
        return ids

    def _check(self, text: str, n_tokens: int, index: int) -> None:
        if self._verify is None:
            return
        counted = self._verify(text)
        if counted != n_tokens:
            raise UsageError(
                f"prompt length {n_tokens}: the verifier counts {counted} tokens for request"
                f" {index}'s prompt; is the local tokenizer the server's?"
            )


def make_prompts(
    plan: RequestPlan,
    tokenizer: TokenizerLike,
    verify: Callable[[str], int] | None = None,
) -> list[str]:
    """One prompt per planned request, of its exact `prompt_tokens`, seeded by the plan.

    A conversation's later turn carries its previous turn's prompt, then new text
    (harness.workload.conversation says how long); a plan of shared prefix blocks opens
    each prompt with its request's blocks.
    """
    factory = PromptFactory(tokenizer, plan.seed, verify=verify)
    block_tokens = plan.prefix_block_tokens
    prompts: list[str] = []
    for request in plan.requests:
        if block_tokens is not None:
            blocks = prefix_blocks(request.hash_ids)
            prompts.append(factory.from_blocks(blocks, block_tokens, request.prompt_tokens, request.index))
        elif request.after is None:
            prompts.append(factory.make(request.prompt_tokens, request.index))
        else:
            prompts.append(factory.extend(prompts[request.after], request.prompt_tokens, request.index))
    return prompts


def _text_token_pool(tokenizer: TokenizerLike) -> np.ndarray:
    """Ids of ordinary text tokens: not special, and decoding alone to printable text.

    Byte-fallback pieces (which decode to U+FFFD) and whitespace or control tokens are
    left out: they re-encode unpredictably and make odd prompts.
    """
    special = set(tokenizer.all_special_ids)
    candidates = [i for i in range(tokenizer.vocab_size) if i not in special]
    pieces = tokenizer.batch_decode([[i] for i in candidates])
    pool = [
        i
        for i, piece in zip(candidates, pieces, strict=True)
        if piece.strip() and piece.isprintable() and "\ufffd" not in piece
    ]
    if not pool:
        raise UsageError("tokenizer: its vocabulary has no printable non-special tokens")
    return np.asarray(pool, dtype=np.int64)
