"""The Locust user that streams one completion per task and records its timings."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from locust import FastHttpUser, constant, task
from locust.exception import StopUser

from harness.driver.dispatch import Dispatcher
from harness.driver.journal import RunJournal
from harness.driver.sse import SSEDecoder
from harness.driver.work import WorkItem

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
ERROR_TEXT_LIMIT = 300


@dataclass
class DriverContext:
    """What every user of one run shares."""

    dispatcher: Dispatcher
    journal: RunJournal
    model: str
    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)
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


class StreamingUser(FastHttpUser):
    """Takes work items from the run's dispatcher until none are left."""

    abstract = True
    wait_time = constant(0)
    # Long generations on a slow server: a request may legitimately stream for minutes.
    network_timeout = 600.0
    connection_timeout = 30.0
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
        status, error, complete = 0, "", False
        sent = time.time()
        with self.client.post(
            PATHS[ctx.endpoint],
            json=request_body(item, ctx.model, ctx.endpoint),
            headers={**ctx.headers, "Accept-Encoding": "identity"},
            stream=True,
            catch_response=True,
            name="E2E",
        ) as response:
            status = response.status_code or 0
            if status == 200:
                decoder = SSEDecoder()
                try:
                    complete = self._stream(response, decoder, usage, token_times)
                except Exception as exc:  # a broken stream is a server fault: record it
                    error = f"stream broken: {type(exc).__name__}: {exc}"
                if not complete and not error:
                    error = "stream ended without [DONE]"
            else:
                error = _error_text(response)
            end = time.time()
            meta = response.request_meta
            meta["response_time"] = (end - sent) * 1000
            if error:
                response.failure(error)
            else:
                response.success()
        if token_times:
            self.environment.events.request.fire(
                request_type="SSE", name="TTFT", response_time=(token_times[0] - sent) * 1000,
                response_length=0, exception=None, context={},
            )
        completion = usage.get("completion_tokens", len(token_times) if token_times else -1)
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
            "ok": status == 200 and not error,
            "length_mismatch": status == 200 and not error and completion != item.requested_output_tokens,
        }
        return record, token_times

    @staticmethod
    def _stream(response, decoder: SSEDecoder, usage: dict[str, int], token_times: list[float]) -> bool:
        """Read SSE line by line as it arrives; one timestamp per generated token.

        geventhttpclient's `readline` returns as soon as a whole line is buffered,
        unlike `iter_content`, whose fixed-size reads wait for bytes that may not exist
        yet (or, with chunk_size=None, for the whole body).
        """
        raw = response._response  # Locust exposes no line reader on FastResponse itself
        seen = 0
        while True:
            line = raw.readline(b"\n")
            if not line:
                return decoder.done
            now = time.time()
            for event in decoder.feed(line):
                counted = (event.get("usage") or {}).get("completion_tokens")
                if counted is None:
                    # No usage stats (not vLLM?): count one token per content chunk.
                    counted = seen + bool(_chunk_text(event))
                if counted > seen:
                    token_times.extend([now] * (counted - seen))
                    seen = counted
                usage.update({k: v for k, v in (event.get("usage") or {}).items() if isinstance(v, int)})


def _chunk_text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or [{}]
    choice = choices[0]
    return choice.get("text") or (choice.get("delta") or {}).get("content") or ""


def _error_text(response) -> str:
    try:
        body = response.text or ""
    except Exception:  # the body itself may be what failed
        body = ""
    reason = getattr(response, "error", None)
    text = f"HTTP {response.status_code}: {body.strip()}" if response.status_code else f"no response: {reason}"
    return text[:ERROR_TEXT_LIMIT]


def make_user_class(context: DriverContext) -> type[StreamingUser]:
    """A concrete user class bound to one run's context."""
    return type("BatchBenchUser", (StreamingUser,), {"abstract": False, "context_": context})
