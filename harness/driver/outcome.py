"""How one request ended: the failure kinds, and the records.parquet row that says so.

Every planned request ends as exactly one row: ok, or failed with a kind from
FAILURE_KINDS and a one-line message. The runner writes rows for requests no load
user could answer for (never sent, or lost), so a run's rows always cover its plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.driver.backends import VLLM, Backend
from harness.driver.work import WorkItem

HTTP_STATUS = "http_status"
CONNECTION = "connection"
STALL = "stall"
MALFORMED_STREAM = "malformed_stream"
ERROR_EVENT = "error_event"
INCOMPLETE_STREAM = "incomplete_stream"
USAGE_MISMATCH = "usage_mismatch"
USAGE_DECREASED = "usage_decreased"
USAGE_BEYOND_TEXT = "usage_beyond_text"
NO_TOKEN_IDS = "no_token_ids"
LENGTH_MISMATCH = "length_mismatch"
CLIENT_ERROR = "client_error"
NOT_SENT = "not_sent"
LOST = "lost"

FAILURE_KINDS: dict[str, str] = {
    HTTP_STATUS: "the server answered a status other than 200",
    CONNECTION: "no answer: connection refused, reset or closed mid-response",
    STALL: "no byte for --first-byte-timeout-s after sending, or for --stall-timeout-s once streaming",
    MALFORMED_STREAM: "an event was not UTF-8, not JSON, or not shaped like a completion chunk",
    ERROR_EVENT: "the stream carried an {\"error\": ...} event",
    INCOMPLETE_STREAM: "the stream ended without [DONE]",
    USAGE_MISMATCH: "the server's usage count differs from the token ids that arrived",
    USAGE_DECREASED: "the server's running usage fell below a count it had already given",
    USAGE_BEYOND_TEXT: "no token ids: the server's usage claims more tokens than its streamed text can hold",
    NO_TOKEN_IDS: "a vLLM stream carried no token ids, though the request asked for them (return_token_ids)",
    LENGTH_MISMATCH: "the tokens that arrived differ from the number asked for",
    CLIENT_ERROR: "the load user itself failed while handling the response",
    NOT_SENT: "never sent: the run was interrupted first",
    LOST: "sent, but no outcome reached the journal (interrupted in flight, or a load user died)",
}

ERROR_TEXT_LIMIT = 300


@dataclass(frozen=True)
class Failure:
    """Why a request failed: a kind of FAILURE_KINDS and one line of detail."""

    kind: str
    message: str

    def line(self) -> str:
        """The message as one bounded line (server text may hold newlines or be huge)."""
        return " ".join(self.message.split())[:ERROR_TEXT_LIMIT]


@dataclass(frozen=True)
class Timing:
    """When a request was due, sent, answered and ended (epoch seconds; NaN if not)."""

    scheduled_s: float = math.nan
    sent_s: float = math.nan
    first_token_s: float = math.nan
    end_s: float = math.nan


def record_row(
    item: WorkItem,
    worker: str,
    timing: Timing,
    status: int,
    arrived: int,
    usage: tuple[int, int],
    failure: Failure | None,
    backend: Backend = VLLM,
    retokenized: int = -1,
) -> dict[str, Any]:
    """The records.parquet row of one request (columns: harness.rundir.records.RECORD_FIELDS).

    `usage` is the server's (prompt, completion) count, -1 where it gave none;
    `retokenized` the streamed text's tokens by the run's tokenizer, -1 where not counted.
    """
    requested = item.requested_output_tokens
    return {
        "request_id": item.request_id,
        "worker": worker,
        "planned_prompt_tokens": item.planned_prompt_tokens,
        "planned_output_tokens": item.planned_output_tokens,
        "requested_output_tokens": item.requested_output_tokens,
        "wave": item.wave,
        "trace_row": item.trace_row,
        "session": item.session,
        "hash_ids": item.hash_ids,
        "label": item.label,
        "turn": item.turn,
        "after": item.after,
        "think_s": item.think_s,
        "scheduled_s": timing.scheduled_s,
        "sent_s": timing.sent_s,
        "lateness_s": timing.sent_s - timing.scheduled_s,
        "first_token_s": timing.first_token_s,
        "end_s": timing.end_s,
        "prompt_tokens": usage[0],
        "completion_tokens": arrived,
        "usage_completion_tokens": usage[1],
        "status": status,
        "error_kind": failure.kind if failure else "",
        "error": failure.line() if failure else "",
        "ok": failure is None,
        "length_mismatch": arrived != requested,
        "length_forced": backend.forces_length,
        "retokenized_completion_tokens": retokenized,
        "length_exact": backend.length_exact(failure is None, requested, arrived, usage[1], retokenized),
    }


def unanswered_row(item: WorkItem, worker: str, failure: Failure) -> dict[str, Any]:
    """The row of a request that never got an outcome from a load user."""
    return record_row(item, worker, Timing(), 0, 0, (-1, -1), failure)
