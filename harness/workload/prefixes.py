"""Shared prompt prefixes: the blocks a request's prompt is made of, and how much a plan reuses.

A request's `hash_ids` (Mooncake's layout: one id per block of `block_tokens` prompt tokens,
an id naming the block's content and, in Mooncake, everything before it) list the blocks
its prompt opens with. Two requests that carry the same id carry the same tokens there
(harness.workload.prompts builds them so), as the trace's requests did. A synthetic
workload's shared prefix is one block per group, `shared_prefix.tokens` long.

A conversation's later turn opens with its previous turn's prompt: that is its reuse.

The plan's own reuse is what a prefix cache of unlimited size, computing each request
before the next arrives, would find: per request, the leading blocks an earlier request
already carried, in tokens, over all prompt tokens. A server finds less where requests
that share a block arrive together (none of them finds it computed yet) and in units of
its own cache block (a partial block at the end of the shared part is computed again).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

# vLLM's switches for its prefix cache. The launcher passes the off switch before the user's
# arguments (the last one wins); a workload's `prefix_cache: true` adds the on switch after.
PREFIX_CACHE_ON, PREFIX_CACHE_OFF = "--enable-prefix-caching", "--no-enable-prefix-caching"


class PrefixIdsError(ValueError):
    """A request's hash_ids is not a list of ids."""


def prefix_blocks(hash_ids: str | None) -> list[str]:
    """The block ids of one request's `hash_ids` (JSON text of a list), as strings; [] for none.

    Raises PrefixIdsError if the text is not a JSON list of numbers or strings.
    """
    if not hash_ids:
        return []
    try:
        value = json.loads(hash_ids)
    except json.JSONDecodeError:
        raise PrefixIdsError(f"hash_ids {hash_ids[:40]!r} is not a JSON list of ids") from None
    if not isinstance(value, list) or not all(isinstance(v, int | str) and not isinstance(v, bool) for v in value):
        raise PrefixIdsError(f"hash_ids {hash_ids[:40]!r} is not a list of numbers or strings")
    return [str(v) for v in value]


def shared_prefix_ids(index: int, groups: int) -> str:
    """The hash_ids of request `index` when `groups` shared prefixes go round the requests."""
    return json.dumps([f"shared-{index % groups}"])


@dataclass(frozen=True)
class PlannedReuse:
    """How many of a plan's prompt tokens lie in blocks an earlier request already carried."""

    reused_tokens: int
    prompt_tokens: int

    @property
    def share(self) -> float:
        """reused_tokens / prompt_tokens (0 for an empty plan)."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def conversation_reuse(requests: Iterable[tuple[int, int | None]]) -> PlannedReuse:
    """The reuse of a conversation's requests given as (prompt_tokens, after): a later turn's
    prompt opens with its previous turn's whole prompt (harness.workload.conversation); the
    stand-in answer after it is new text, not what the server generated."""
    listed = list(requests)
    reused = sum(listed[after][0] for _, after in listed if after is not None)
    return PlannedReuse(reused, sum(prompt for prompt, _ in listed))


def planned_reuse(requests: Iterable[tuple[int, str | None]], block_tokens: int) -> PlannedReuse:
    """The reuse of requests given, in send order, as (prompt_tokens, hash_ids).

    A request reuses its leading blocks up to the first that no earlier request carried
    (a cache holds a block only after the blocks before it), at most its whole prompt.
    """
    seen: set[str] = set()
    reused = total = 0
    for prompt_tokens, hash_ids in requests:
        blocks = prefix_blocks(hash_ids)
        leading = next((k for k, block in enumerate(blocks) if block not in seen), len(blocks))
        reused += min(leading * block_tokens, prompt_tokens)
        total += prompt_tokens
        seen.update(blocks)
    return PlannedReuse(reused, total)
