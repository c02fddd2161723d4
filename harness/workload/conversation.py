"""A trace's sessions as conversations: which turn each row is, the turn it waits for, and the prompt it sends.

A row's prompt tokens are the new text of its turn. The prompt sent carries the whole chat
so far: turn k sends the earlier turns' prompts and answers, then its own text, so

    sent_prompt(k) = sent_prompt(k-1) + output(k-1) + prompt(k),  sent_prompt(first) = prompt(first).

Turn k is due when turn k-1's answer has ended plus its think time (harness.driver.dispatch);
its own arrival in the trace only orders and windows the rows. A session's turns count up by
one, in row order, from its first row replayed (a window may cut a chat's start: the turns
before it are not carried). A row with an empty session is a chat of one turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import UsageError
from harness.workload.trace import TraceRows, TraceSource

NO_PREDECESSOR = -1


@dataclass(frozen=True)
class Turns:
    """Each replayed row's place in its conversation: numpy columns parallel to its TraceRows."""

    turn: np.ndarray  # int64: the turn's number (the trace's, else 1, 2, ... in row order)
    after: np.ndarray  # int64: the index of the session's previous turn among the rows; -1 for a first turn
    think_s: np.ndarray  # float64: replay seconds from the previous turn's answer to this turn; 0 for a first turn
    prompt_tokens: np.ndarray  # int64: the prompt sent, the earlier turns' prompts and answers included


def link_turns(rows: TraceRows, source: TraceSource) -> Turns:
    """Link each row to its session's previous turn, and grow its prompt by the chat so far.

    Raises UsageError, naming the file and the row, for a turn that repeats or skips within its
    session, and for a grown prompt plus its output over the trace's max_tokens.
    """
    assert rows.session is not None and rows.think_s is not None, "read_trace reads a conversation's columns"
    count = len(rows)
    turn = np.ones(count, dtype=np.int64)
    after = np.full(count, NO_PREDECESSOR, dtype=np.int64)
    sent = rows.prompt_tokens.copy()
    think = np.zeros(count, dtype=np.float64)
    last: dict[str, int] = {}
    for i, session in enumerate(rows.session):
        previous = last.get(session) if session else None
        turn[i] = rows.turn[i] if rows.turn is not None else (1 if previous is None else turn[previous] + 1)
        if previous is None:
            last[session] = i
            continue
        _check_turn(source, rows, session, turn, previous, i)
        after[i] = previous
        sent[i] += sent[previous] + rows.output_tokens[previous]
        think[i] = rows.think_s[i]
        last[session] = i
    _check_length(source, rows, turn, sent)
    return Turns(turn=turn, after=after, think_s=think, prompt_tokens=sent)


def _check_turn(source: TraceSource, rows: TraceRows, session: str, turn: np.ndarray, previous: int, i: int) -> None:
    """Refuse row i's turn unless it is one more than its session's previous turn, row `previous`."""
    before, now = int(turn[previous]), int(turn[i])
    if now == before + 1:
        return
    column = source.mapping.turn
    what = "repeats" if now == before else f"follows turn {before}"
    raise UsageError(f"{source.path}: row {int(rows.row[i]) + 1}: {column} {now} of session {session!r} {what}"
                     f" (row {int(rows.row[previous]) + 1}): a session's turns count up by one, in row order")


def _check_length(source: TraceSource, rows: TraceRows, turn: np.ndarray, sent: np.ndarray) -> None:
    limit = source.max_tokens
    if limit is None:
        return
    over = sent + rows.output_tokens > limit
    if not np.any(over):
        return
    first = int(np.flatnonzero(over)[0])
    session = rows.session[first] if rows.session is not None else ""
    asked = f"{int(sent[first])} + {int(rows.output_tokens[first])}"
    raise UsageError(f"{source.path}: {int(over.sum())} of {len(rows)} turns ask for more than max_tokens {limit} once"
                     f" their prompt carries the chat so far (first: row {int(rows.row[first]) + 1}, turn"
                     f" {int(turn[first])} of session {session!r}, {asked}): a conversation's prompt grows by every"
                     " earlier prompt and answer")
