"""The Locust user that streams one completion per task and records its timings."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gevent
import httpx
from locust import User, constant, task
from locust.exception import StopUser

from harness.driver.backends import VLLM, Backend
from harness.driver.dispatch import WorkSource
from harness.driver.journal import RunJournal
from harness.driver.outcome import CLIENT_ERROR, CONNECTION, HTTP_STATUS, STALL, Failure, Timing, record_row
from harness.driver.steps import cache_scope, request_tag
from harness.driver.stream import StreamFault, StreamReader
from harness.driver.timeouts import Timeouts
from harness.driver.work import WorkItem

if TYPE_CHECKING:  # only in gevent's stubs, not at run time
    from gevent._types import _TimerWatcher

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass
class DriverContext:
    """What every user of one run shares."""

    dispatcher: WorkSource
    journal: RunJournal
    # One client for every user: creating one per request costs tens of ms of CPU.
    client: httpx.Client
    model: str
    endpoint: str
    # Inside every X-Request-Id, so the engine's step log can be matched to the plan.
    run_tag: str = ""
    # `client`'s read timeout is `timeouts.first_byte_s`; the user enforces `stall_s`.
    timeouts: Timeouts = field(default_factory=Timeouts)
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # The kind of server: how a request asks for its length, and how its tokens are counted.
    backend: Backend = VLLM
    # Counts a text's tokens with the run's tokenizer, for a backend that re-tokenises the streamed text.
    count_tokens: Callable[[str], int] | None = None
    generated_tokens: int = 0
    sent: int = 0
    failed: int = 0


def request_body(item: WorkItem, model: str, endpoint: str, backend: Backend = VLLM,
                 run_tag: str = "") -> dict[str, Any]:
    """The JSON body that asks for `requested_output_tokens` (exactly, where `backend` can), streamed with usage;
    the prefix cache, where on, is scoped to the run `run_tag` names."""
    return backend.request_body(model, item.prompt, item.requested_output_tokens, endpoint,
                                cache_scope=cache_scope(run_tag))


class StreamingUser(User):
    """Takes work items from the run's dispatcher until none are left.

    Streams over the run's shared httpx client (with a C-parsing transport,
    harness.driver.http_client), not FastHttpUser's geventhttpclient: with many concurrent
    streams geventhttpclient leaves bytes unread in the sockets' receive queues while its
    hub sits idle, so whole streams arrive in one burst at the end (TTFT = E2E); httpx on
    the same greenlets reads them as they come (docs/validation/client-ceiling.md).

    Whatever the server sends, every item handed out ends as one journal row: any
    exception while sending or reading becomes a failed row with its kind and reason.
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
        ctx.generated_tokens += record["completion_tokens"]
        ctx.failed += not record["ok"]
        ctx.journal.add(record, token_times)

    def _send(self, item: WorkItem) -> tuple[dict[str, Any], list[float]]:
        ctx = self.context_
        scheduled = ctx.dispatcher.scheduled_s(item)
        backend = ctx.backend
        reader = StreamReader(keep_text=backend.retokenizes)
        status, failure = 0, None
        sent = time.time()
        ctx.sent += 1
        try:
            with ctx.client.stream(
                "POST",
                PATHS[ctx.endpoint],
                json=request_body(item, ctx.model, ctx.endpoint, backend, ctx.run_tag),
                headers={"X-Request-Id": request_tag(ctx.run_tag, item.request_id), **backend.stream_headers},
            ) as response:
                status = response.status_code
                if status != 200:
                    failure = Failure(HTTP_STATUS, f"HTTP {status}: {response.read().decode(errors='replace')}")
                else:
                    _read_stream(response, reader, ctx.timeouts.stall_s)
        except StreamFault as fault:
            failure = fault.failure
        except _Stalled:
            failure = Failure(STALL, f"no byte for {ctx.timeouts.stall_s:g} s after {reader.arrived} tokens")
        except httpx.ReadTimeout:
            failure = Failure(
                STALL, f"no byte within {ctx.timeouts.first_byte_s:g} s of sending (queued, or a hung server)"
            )
        except httpx.HTTPError as exc:  # refused, reset, closed mid-body: a server fault, recorded
            failure = Failure(CONNECTION, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - whatever else breaks, the request still gets its row
            failure = Failure(CLIENT_ERROR, f"{type(exc).__name__}: {exc}")
        end = time.time()
        retokenized = _retokenized(ctx.count_tokens, reader.text)
        if failure is None:
            failure = reader.verdict(item.requested_output_tokens, backend.forces_length, backend.sends_done,
                                     backend.asks_token_ids, retokenized)
        self._fire("E2E", end - sent, failure.line() if failure else "")
        if reader.token_times:
            self._fire("TTFT", reader.token_times[0] - sent, "")
        timing = Timing(
            scheduled_s=float("nan") if scheduled is None else scheduled,
            sent_s=sent,
            first_token_s=reader.token_times[0] if reader.token_times else float("nan"),
            end_s=end,
        )
        usage = (reader.usage_prompt, reader.usage_completion)
        row = record_row(item, ctx.worker, timing, status, reader.arrived, usage, failure, backend, retokenized)
        return row, reader.token_times

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


def _retokenized(count_tokens: Callable[[str], int] | None, text: str | None) -> int:
    """The streamed text's tokens; -1 when not kept, not counted, or the count failed (the row is then not exact)."""
    if text is None or count_tokens is None:
        return -1
    try:
        return count_tokens(text)
    except Exception:  # noqa: BLE001 - a tokenizer fault must not cost the request its row
        return -1


class _Stalled(Exception):
    """No byte for the stall timeout in a stream that had begun."""


def _read_stream(response: httpx.Response, reader: StreamReader, stall_s: float) -> None:
    """Feed the body to `reader` as it arrives, failing with _Stalled on a pause of `stall_s`.

    The first byte's wait is left to the client's read timeout: a request queued in the
    server gets nothing until admitted. httpx fixes a body's read timeout when the body
    starts, so the shorter bound after it is a watch of our own.
    """
    watch: _StallWatch | None = None
    try:
        for chunk in response.iter_raw():
            now = time.time()
            if watch is None:
                watch = _StallWatch(stall_s, now)
            watch.last = now
            reader.feed(chunk, now)
    finally:
        if watch is not None:
            watch.stop()


class _StallWatch:
    """Throws _Stalled into the reading greenlet once no chunk came for `stall_s`.

    Per chunk it costs one assignment (`last`): its timer wakes once per `stall_s` and
    re-arms for the time left. A gevent.Timeout restarted per chunk costs microseconds a
    chunk, and cancel-then-start of one Timeout does not move its deadline (gevent 26, libev).
    """

    def __init__(self, stall_s: float, now: float) -> None:
        self.stall_s = stall_s
        self.last = now
        self._greenlet = gevent.getcurrent()
        self._timer: _TimerWatcher | None = None
        self._arm(stall_s)

    def _arm(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.close()
        self._timer = gevent.get_hub().loop.timer(delay)
        self._timer.start(self._check)

    def _check(self) -> None:
        idle = time.time() - self.last
        if idle >= self.stall_s:
            self._greenlet.throw(_Stalled())
        else:
            self._arm(self.stall_s - idle)

    def stop(self) -> None:
        """Stop watching (the stream ended, one way or another)."""
        assert self._timer is not None, "armed in __init__"
        self._timer.close()


def make_user_class(context: DriverContext | None = None) -> type[StreamingUser]:
    """A concrete user class bound to one run's context.

    Without one, the class is for a distributed run: the master's (whose users run on the
    workers) or a worker's before its share of the run arrives (it sets `context_` then).
    Master and workers name it alike: Locust spawns users by class name.
    """
    return type("BatchBenchUser", (StreamingUser,), {"abstract": False, "context_": context})
