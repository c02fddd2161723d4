"""Static mode really is static, continuous really is continuous: the B+1 scenario on a real engine.

B members with planned outputs of 20 tokens and one of 200 (at B = 4: 20/20/20/200)
start together; once all of them have streamed a token (or FIFTH_AFTER_S later at
most), one more request, "the fifth" (the B+1-th), is sent. It runs at the server's own
B, so the servers of the other checks serve it too. What
the scheduler did is read from the engine's own step log (launchers.engine.step_recorder), in
engine steps, never from speed: every request carries an X-Request-Id, so its admission
and finish steps are known exactly.

Each mode runs the scenario a number of attempts and every attempt must be conclusive
(the fifth sent while the long member still ran) and right. There is no retry: with the
engine-with-worker process layout the client is not starved, so an inconclusive attempt
is a failure, not bad luck.

What is right:
- both modes: every request streams exactly its planned tokens, and at most B run in a step;
- static: the B members are admitted in one step; the fifth only after the long
  member's last step; while the batch drains nothing joins it (running only falls,
  B -> ... -> 1); and the engine holds the fifth waiting while the long member runs alone;
- continuous: the fifth is admitted within CONTINUOUS_MAX_WAIT_STEPS engine steps of
  being sent, as soon as a 20-token member frees a slot, beside the long member.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.driver.sse import SSEDecoder
from harness.driver.steps import StepLogCursor, request_tag
from launchers import Mode, ServerHandle, ServerSpec

SHORT_TOKENS, LONG_TOKENS = 20, 200
FIFTH_TOKENS = 10
FIFTH_AFTER_S = 0.2
# In continuous mode the fifth must get its first token within 50 engine steps of being sent.
CONTINUOUS_MAX_WAIT_STEPS = 50
# Static mode waits this long for a full batch, so the B members form one batch even
# when they reach the server a few ms apart. In a burst the oldest request has waited
# longer than this by the time a later batch forms, so only a first partial batch waits.
STATIC_BATCH_WAIT_S = 1.0
REQUEST_TIMEOUT_S = 120.0


def member_tokens(batch_size: int) -> tuple[int, ...]:
    """The members' planned outputs at B = `batch_size`: all short but the last."""
    return (SHORT_TOKENS,) * (batch_size - 1) + (LONG_TOKENS,)


def server_spec(
    mode: Mode, model: str, batch_size: int, extra_args: tuple[str, ...] = (), async_scheduling: bool | None = None
) -> ServerSpec:
    """The server the scenario needs in `mode` at B = `batch_size`: in static mode, with a wait for a full batch."""
    wait = STATIC_BATCH_WAIT_S if mode == "static" else 0.0
    return ServerSpec(mode=mode, model=model, max_num_seqs=batch_size, batch_wait_s=wait, vllm_args=extra_args,
                      async_scheduling=async_scheduling)


@dataclass
class Stream:
    """Client-side timings of one streamed completion (time.time() clock), filled in as it streams."""

    sent: float = 0.0
    first_token: float | None = None
    completion_tokens: int = 0


def stream(client: httpx.Client, model: str, prompt: str, tokens: int, into: Stream, request_id: str) -> Stream:
    """Send one streamed completion of exactly `tokens` tokens, tagged `request_id`, timing it into `into`."""
    body = {
        "model": model, "prompt": prompt, "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    into.sent = time.time()
    decoder = SSEDecoder()
    with client.stream("POST", "/v1/completions", json=body, headers={"X-Request-Id": request_id},
                       timeout=REQUEST_TIMEOUT_S) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            now = time.time()
            for event in decoder.feed(chunk):
                produced = (event.get("usage") or {}).get("completion_tokens", into.completion_tokens)
                if produced > into.completion_tokens:
                    into.first_token = into.first_token or now
                    into.completion_tokens = produced
    return into


@dataclass(frozen=True)
class Scenario:
    """One run of the B+1 scenario: the fifth's send time, the engine's steps, the tokens that arrived.

    Requests are numbered by their X-Request-Id suffix: members 0..B-1 (the long one last), the fifth B.
    """

    batch_size: int
    fifth_sent_s: float
    steps: list[dict[str, Any]]
    completion_tokens: list[int]

    @property
    def fifth(self) -> int:
        return self.batch_size

    @property
    def long(self) -> int:
        return self.batch_size - 1

    @property
    def planned_tokens(self) -> list[int]:
        return [*member_tokens(self.batch_size), FIFTH_TOKENS]

    def admitted_at(self, request: int) -> int | None:
        return next((i for i, step in enumerate(self.steps) if request in step["admitted"]), None)

    def finished_at(self, request: int) -> int | None:
        return next((i for i, step in enumerate(self.steps) if request in step["finished"]), None)

    def first_step_after_send(self) -> int | None:
        """The first step that began after the fifth was sent (the engine's clock is the same wall clock)."""
        return next((i for i, step in enumerate(self.steps) if step["t_s"] >= self.fifth_sent_s), None)

    def summary(self) -> str:
        if not self.steps:
            return f"no engine steps were recorded for this attempt (tokens {self.completion_tokens})"
        t0 = self.steps[0]["t_s"]
        shape = [(i, round(s["t_s"] - t0, 3), s["running"], s["waiting"], s["admitted"], s["finished"])
                 for i, s in enumerate(self.steps) if s["admitted"] or s["finished"]]
        return (f"fifth sent at {self.fifth_sent_s - t0:.3f} s; "
                f"steps (index, t, running, waiting, admitted, finished): {shape}")


def inconclusive(s: Scenario) -> bool:
    """True unless the fifth was sent while the long member was still running."""
    long_end = s.finished_at(s.long)
    return long_end is None or not s.fifth_sent_s < s.steps[long_end]["t_s"]


def common_faults(s: Scenario) -> list[str]:
    """What is wrong in either mode: tokens other than planned, more than B in a step, a request never seen."""
    faults = []
    if s.completion_tokens != s.planned_tokens:
        faults.append(f"tokens {s.completion_tokens}, planned {s.planned_tokens}")
    if s.steps and max(step["running"] for step in s.steps) > s.batch_size:
        faults.append(f"more than {s.batch_size} requests ran in one step")
    if any(s.admitted_at(i) is None or s.finished_at(i) is None for i in range(s.fifth + 1)):
        faults.append("a request's admission or finish is missing from the step log")
    return faults


def static_faults(s: Scenario) -> list[str]:
    """Why this attempt was not static batching (empty: it was)."""
    faults = common_faults(s)
    if faults:
        return faults
    fifth, long = s.fifth, s.long
    admitted = [step for i in range(fifth + 1) if (step := s.admitted_at(i)) is not None]
    finished = [step for i in range(fifth) if (step := s.finished_at(i)) is not None]
    assert len(admitted) == fifth + 1 and len(finished) == fifth, "checked by common_faults"
    first, long_end = min(admitted[:fifth]), finished[long]
    if len(set(admitted[:fifth])) != 1:
        faults.append(f"the {s.batch_size} members were admitted in steps {sorted(set(admitted[:fifth]))}, not in one")
    if not admitted[fifth] > long_end:
        faults.append(f"the fifth was admitted at step {admitted[fifth]}, before the batch drained (step {long_end})")
    running = [step["running"] for step in s.steps[first : long_end + 1]]
    if not (running and running[0] == s.batch_size and running[-1] == 1 and running == sorted(running, reverse=True)):
        faults.append(f"the batch did not only drain {s.batch_size} -> 1: running {running}")
    alone = s.steps[max(finished[:long]) + 1 : long_end]
    if not any(step["running"] == 1 and step["waiting"] == 1 for step in alone):
        faults.append("the engine did not hold the fifth waiting while the long member ran alone")
    return faults


def continuous_faults(s: Scenario) -> list[str]:
    """Why this attempt was not continuous batching (empty: it was)."""
    faults = common_faults(s)
    if faults:
        return faults
    admitted, sent, long_end = s.admitted_at(s.fifth), s.first_step_after_send(), s.finished_at(s.long)
    assert admitted is not None and long_end is not None, "checked by common_faults"
    if sent is None:
        return ["no engine step began after the fifth was sent"]
    waited = admitted - sent
    if waited > CONTINUOUS_MAX_WAIT_STEPS:
        faults.append(f"the fifth waited {waited} engine steps, more than {CONTINUOUS_MAX_WAIT_STEPS}")
    if not admitted < long_end:
        faults.append(f"the fifth was admitted at step {admitted}, not beside the long member (ended {long_end})")
    return faults


JUDGES: dict[Mode, Callable[[Scenario], list[str]]] = {"static": static_faults, "continuous": continuous_faults}


@dataclass(frozen=True)
class ModeResult:
    """Every attempt of one mode and what was wrong with each (an empty list: right)."""

    mode: Mode
    scenarios: tuple[Scenario, ...]
    faults: tuple[tuple[str, ...], ...]

    @property
    def attempts(self) -> int:
        return len(self.scenarios)

    @property
    def right(self) -> int:
        return sum(not faults for faults in self.faults)

    @property
    def passed(self) -> bool:
        return self.attempts > 0 and self.right == self.attempts

    def first_fault(self, with_steps: bool = False) -> str:
        """The first wrong attempt and what was wrong, `with_steps` what the engine did (empty when all were right)."""
        for number, (scenario, faults) in enumerate(zip(self.scenarios, self.faults, strict=True), start=1):
            if faults:
                steps = f"; {scenario.summary()}" if with_steps else ""
                return f"attempt {number}: {'; '.join(faults)}{steps}"
        return ""


def judge(mode: Mode, scenarios: list[Scenario]) -> ModeResult:
    """Each attempt judged as `mode`: inconclusive counts as wrong, there is no retry."""
    faults: list[tuple[str, ...]] = []
    for scenario in scenarios:
        # An inconclusive attempt says nothing about the mode: that, not what followed from it, is its fault.
        if not common_faults(scenario) and inconclusive(scenario):
            faults.append(("inconclusive: the fifth was sent after the long member had ended",))
        else:
            faults.append(tuple(JUDGES[mode](scenario)))
    return ModeResult(mode, tuple(scenarios), tuple(faults))


def run_scenario(server: ServerHandle) -> Scenario:
    """Run the B+1 scenario once on `server` (at its own B) and cut its steps out of its step log."""
    assert server.info.step_log is not None, "a launched server records its steps"
    tag = secrets.token_hex(4)
    cursor = StepLogCursor(Path(server.info.step_log))
    model, batch_size = server.served_model, server.info.max_num_seqs
    planned = member_tokens(batch_size)
    with httpx.Client(base_url=server.base_url, limits=httpx.Limits(max_connections=batch_size + 4)) as client:
        members = [Stream() for _ in planned]
        threads = [_start(stream, client, model, f"ba be bi {i}", n, members[i], request_tag(tag, i))
                   for i, n in enumerate(planned)]
        # The fifth follows once every member streams, or FIFTH_AFTER_S after they were sent.
        deadline = time.time() + FIFTH_AFTER_S
        while not all(m.first_token for m in members) and time.time() < deadline:
            time.sleep(0.005)
        fifth = stream(client, model, "ga ge gi", FIFTH_TOKENS, Stream(), request_tag(tag, batch_size))
        for thread in threads:
            thread.join(timeout=REQUEST_TIMEOUT_S)
    steps = cursor.read_run(tag, expected_finishes=batch_size + 1).to_pylist()
    return Scenario(batch_size, fifth.sent, steps, [m.completion_tokens for m in members] + [fifth.completion_tokens])


def warm(server: ServerHandle) -> None:
    """A full batch first: the first step of each new batch shape compiles."""
    batch_size = server.info.max_num_seqs
    with httpx.Client(base_url=server.base_url, limits=httpx.Limits(max_connections=batch_size + 4)) as client:
        threads = [_start(stream, client, server.served_model, f"ba be {i}", 8, Stream(), f"warm-{i}")
                   for i in range(batch_size)]
        for thread in threads:
            thread.join(timeout=REQUEST_TIMEOUT_S)


def check_mode(server: ServerHandle, mode: Mode, attempts: int) -> ModeResult:
    """Warm `server` (serving `mode`), run the scenario `attempts` times at its B, judge every attempt."""
    warm(server)
    return judge(mode, [run_scenario(server) for _ in range(attempts)])


def _start(fn: Callable[..., Any], *args: Any) -> threading.Thread:
    # Threads, or greenlets under the CLI's gevent patching: the members stream side by side either way.
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread
