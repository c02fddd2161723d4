"""Request plans: a workload spec expanded into the exact list of requests to send.

A plan is a pure function of the spec: `build_plan` seeds one `SeedSequence` with
`spec.seed` and spawns independent child streams for prompt lengths, output lengths and
arrival times, so editing one distribution leaves the other two columns unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.errors import UsageError
from harness.validation import describe_validation_error
from harness.workload.conversation import NO_PREDECESSOR, Turns, link_turns
from harness.workload.limits import MAX_DURATION_S, MAX_REQUESTS
from harness.workload.prefixes import PrefixIdsError, prefix_blocks, shared_prefix_ids
from harness.workload.spec import PoissonArrival, TraceArrival, WorkloadSpec
from harness.workload.trace import TraceRows, TraceSource, read_trace

# Child streams of SeedSequence(spec.seed); prompt text uses the next key (see prompts.py).
PROMPT_LENGTH_STREAM, OUTPUT_LENGTH_STREAM, ARRIVAL_STREAM = 0, 1, 2

# A closed loop given a duration gets users * ceil(duration_s) * this many requests:
# enough unless requests average under 1/this seconds, which no workload here comes
# near (outputs are hundreds of tokens). The driver stops at duration_s regardless.
CLOSED_LOOP_REQUESTS_PER_USER_SECOND = 10

ARRIVAL_DECIMALS = 6
# The fields only a trace's requests carry (a conversation's: the last three).
TRACE_FIELDS = ("trace_row", "session", "hash_ids", "label", "turn", "after", "think_s")

if TYPE_CHECKING:
    import pandas as pd


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedRequest(_Frozen):
    """One request to send."""

    index: NonNegativeInt = Field(description="Position in the plan, 0-based.")
    prompt_tokens: PositiveInt = Field(description="Exact prompt length, tokens.")
    output_tokens: PositiveInt = Field(description="Exact output length to force, tokens.")
    arrival_s: NonNegativeFloat | None = Field(
        description="Send time, seconds after the run starts (rounded to 6 decimals);"
        " None in a closed loop, where a user sends when its previous request ends."
    )
    # A trace's request: which row it is, and the trace's optional columns (None elsewhere).
    trace_row: NonNegativeInt | None = Field(None, description="The row of the trace, 0-based among its data rows.")
    session: str | None = Field(None, description="The trace's session or conversation id.")
    hash_ids: str | None = Field(None, description="The trace's prefix hash ids, as JSON.")
    label: str | None = Field(None, description="The trace's class label.")
    # A conversation's turn (harness.workload.conversation); None elsewhere.
    turn: NonNegativeInt | None = Field(None, description="The turn's number in its session.")
    after: NonNegativeInt | None = Field(None, description="The index of the session's previous turn: this one is due"
                                         " when that one's answer has ended, plus think_s (None: a first turn).")
    think_s: NonNegativeFloat | None = Field(None, description="Seconds after the previous turn's answer ended at"
                                             " which this turn is due (None: a first turn).")

    @field_validator("arrival_s", "think_s")
    @classmethod
    def _round(cls, seconds: float | None) -> float | None:
        # Rounded on construction so the JSON text, and its hash, is the same everywhere.
        return None if seconds is None else round(seconds, ARRIVAL_DECIMALS)


class RequestPlan(_Frozen):
    """Every request of one run, in send order, plus what the driver needs to send them."""

    version: Literal[1] = Field(1, description="Plan format version.")
    spec_name: str = Field(description="Name of the workload spec the plan was built from.")
    seed: NonNegativeInt = Field(description="The spec's seed; prompt text is derived from it.")
    endpoint: Literal["completions", "chat"] = Field(description="Endpoint to send to.")
    arrival: Literal["closed", "poisson", "burst", "trace"] = Field(description="Arrival kind.")
    users: PositiveInt | None = Field(description="Concurrent users (closed loop only).")
    duration_s: PositiveFloat | None = Field(
        description="Stop sending after this many seconds (None: send every request)."
    )
    requests: tuple[PlannedRequest, ...] = Field(description="The requests, in send order.")
    trace_clipped: NonNegativeInt | None = Field(
        None, description="A trace's rows clipped to its max_tokens (None: not a trace)."
    )
    prefix_block_tokens: PositiveInt | None = Field(
        None, description="Tokens per block of the requests' hash_ids: prompts are built from those blocks, so"
        " requests sharing a hash id share its tokens (None: every prompt's text is its own)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> RequestPlan:
        if (self.users is not None) != (self.arrival == "closed"):
            raise ValueError("users: given exactly when arrival is closed")
        if [r.index for r in self.requests] != list(range(len(self.requests))):
            raise ValueError("requests: indices must be 0, 1, 2, ... in order")
        closed = self.arrival == "closed"
        if any((r.arrival_s is None) != closed for r in self.requests):
            raise ValueError("requests: arrival_s must be null exactly when arrival is closed")
        # A turn waits on an earlier one: the order the driver hands out items in cannot deadlock.
        if any(r.after is not None and (r.after >= r.index or r.think_s is None) for r in self.requests):
            raise ValueError("requests: a turn's after must be an earlier request's index, with a think_s")
        if self.prefix_block_tokens is not None:
            for request in self.requests:
                try:
                    prefix_blocks(request.hash_ids)
                except PrefixIdsError as exc:
                    raise ValueError(f"requests[{request.index}]: {exc}") from None
        return self

    @property
    def conversation(self) -> bool:
        """Whether some request waits for an earlier one's answer."""
        return any(request.after is not None for request in self.requests)

    def to_json(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, UTF-8): byte-identical for equal plans."""
        # A trace's fields are left out where unset, so a plan that is not a trace's reads as before.
        unset = {name for name in ("trace_clipped", "prefix_block_tokens") if getattr(self, name) is None}
        document = self.model_dump(mode="json", exclude=unset)
        for request in document["requests"]:
            for name in TRACE_FIELDS:
                if request[name] is None:
                    del request[name]
        return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str) -> RequestPlan:
        """Parse `to_json` output; raises `UsageError` if it is not a valid plan."""
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise UsageError(f"request plan: {describe_validation_error(exc)}") from exc

    def sha256(self) -> str:
        """Hex SHA-256 of `to_json()`: identifies the plan in results."""
        return hashlib.sha256(self.to_json()).hexdigest()

    def to_frame(self) -> pd.DataFrame:
        """One row per request; columns index, prompt_tokens, output_tokens (int64) and
        arrival_s (float64, NaN in a closed loop)."""
        import pandas as pd  # here, not at the top: the CLI imports plans to check its options

        return pd.DataFrame(
            {
                "index": np.array([r.index for r in self.requests], dtype=np.int64),
                "prompt_tokens": np.array([r.prompt_tokens for r in self.requests], dtype=np.int64),
                "output_tokens": np.array([r.output_tokens for r in self.requests], dtype=np.int64),
                "arrival_s": np.array(
                    [np.nan if r.arrival_s is None else r.arrival_s for r in self.requests],
                    dtype=np.float64,
                ),
            }
        )


def build_plan(spec: WorkloadSpec) -> RequestPlan:
    """Expand `spec` into its request plan; the same spec always gives the same plan.

    Raises UsageError, before drawing anything, for a spec whose plan is too large to
    hold or whose sends lie too far out (harness.workload.limits).
    """
    if spec.trace is not None:
        return _trace_plan(spec, spec.trace)
    _check_size(spec)
    streams = np.random.SeedSequence(spec.seed).spawn(3)
    arrivals = _arrival_times(spec, np.random.default_rng(streams[ARRIVAL_STREAM]))
    count = len(arrivals)
    prompts = spec.prompt_tokens.sample(np.random.default_rng(streams[PROMPT_LENGTH_STREAM]), count)
    outputs = spec.output_tokens.sample(np.random.default_rng(streams[OUTPUT_LENGTH_STREAM]), count)
    shared = spec.shared_prefix
    if shared is not None:
        _check_room(spec.name, shared.tokens, prompts)
    return RequestPlan(
        spec_name=spec.name,
        seed=spec.seed,
        endpoint=spec.endpoint,
        arrival=spec.arrival.kind,
        users=spec.arrival.users if spec.arrival.kind == "closed" else None,
        duration_s=spec.duration_s,
        requests=tuple(
            PlannedRequest(
                index=i, prompt_tokens=int(p), output_tokens=int(o), arrival_s=a,
                hash_ids=None if shared is None else shared_prefix_ids(i, shared.groups),
            )
            for i, (p, o, a) in enumerate(zip(prompts, outputs, arrivals, strict=True))
        ),
        prefix_block_tokens=None if shared is None else shared.tokens,
    )


def _check_room(name: str, prefix_tokens: int, prompts: np.ndarray) -> None:
    """Refuse a shared prefix that a planned prompt cannot hold with a token of its own."""
    short = np.flatnonzero(prompts <= prefix_tokens + 1)
    if len(short):
        first = int(short[0])
        raise UsageError(f"{name}: shared_prefix.tokens {prefix_tokens} leaves no room in {len(short)} of"
                         f" {len(prompts)} prompts (first: request {first}, {int(prompts[first])} tokens; a prompt's"
                         " length counts the prefix and a BOS token): raise prompt_tokens or shorten the prefix")


def _trace_plan(spec: WorkloadSpec, source: TraceSource) -> RequestPlan:
    """The trace's rows as they are replayed: at their (scaled) times, or all at once for a burst, with
    their own lengths and ids."""
    rows = read_trace(source, spec.num_requests)
    if rows.arrival_s[-1] > MAX_DURATION_S:
        raise UsageError(f"{source.path}: its last request would be sent after {rows.arrival_s[-1]:.3g} s, more than"
                         f" {MAX_DURATION_S:g} s: replay it faster (time_scale) or a shorter window (window_s)")
    optional = {name: getattr(rows, name) for name in ("session", "hash_ids", "label")}
    if source.block_tokens is not None:
        _check_blocks(source, rows)
    arrivals = np.zeros(len(rows)) if spec.arrival.kind == "burst" else rows.arrival_s
    turns = link_turns(rows, source) if source.conversation is not None else None
    prompts = rows.prompt_tokens if turns is None else turns.prompt_tokens
    return RequestPlan(
        spec_name=spec.name, seed=spec.seed, endpoint=spec.endpoint, arrival=spec.arrival.kind, users=None,
        duration_s=None,
        requests=tuple(
            PlannedRequest(
                index=i, prompt_tokens=int(prompts[i]), output_tokens=int(rows.output_tokens[i]),
                arrival_s=float(arrivals[i]), trace_row=int(rows.row[i]),
                **{name: None if values is None else values[i] for name, values in optional.items()},
                **({} if turns is None else _turn_fields(turns, i)),
            )
            for i in range(len(rows))
        ),
        trace_clipped=rows.clipped,
        prefix_block_tokens=source.block_tokens,
    )


def _check_blocks(source: TraceSource, rows: TraceRows) -> None:
    """Refuse, naming the row, a hash_ids cell that is not a list of ids."""
    for i, hash_ids in enumerate(rows.hash_ids or ()):
        try:
            prefix_blocks(hash_ids)
        except PrefixIdsError as exc:
            raise UsageError(f"{source.path}: row {int(rows.row[i]) + 1}: {exc}") from None


def _turn_fields(turns: Turns, i: int) -> dict[str, Any]:
    """Row i's conversation fields: its turn, and for a later turn the one it waits for and its think time."""
    first = turns.after[i] == NO_PREDECESSOR
    return {"turn": int(turns.turn[i]), "after": None if first else int(turns.after[i]),
            "think_s": None if first else float(turns.think_s[i])}


def _check_size(spec: WorkloadSpec) -> None:
    arrival = spec.arrival
    if arrival.kind == "closed" and spec.duration_s is not None:
        count = arrival.users * math.ceil(spec.duration_s) * CLOSED_LOOP_REQUESTS_PER_USER_SECOND
        if count > MAX_REQUESTS:
            raise UsageError(
                f"{spec.name}: users x duration_s plans {count:.3g} requests, more than {MAX_REQUESTS:,}:"
                " shorten the run or use fewer users"
            )
    if arrival.kind != "poisson":
        return
    if spec.duration_s is not None and arrival.rate * spec.duration_s > MAX_REQUESTS:
        raise UsageError(
            f"{spec.name}: rate x duration_s is {arrival.rate * spec.duration_s:.3g} requests,"
            f" more than {MAX_REQUESTS:,}"
        )
    if spec.num_requests is not None and spec.num_requests / arrival.rate > MAX_DURATION_S:
        raise UsageError(
            f"{spec.name}: at rate {arrival.rate:g}/s the last of {spec.num_requests} requests would be due after"
            f" ~{spec.num_requests / arrival.rate:.3g} s, more than {MAX_DURATION_S:g} s"
        )


def _arrival_times(spec: WorkloadSpec, rng: np.random.Generator) -> list[float | None]:
    """Send times: the first request at 0, then gamma inter-arrivals (poisson), all at 0
    (burst), or None (closed). The length of the list is the request count."""
    arrival = spec.arrival
    if isinstance(arrival, TraceArrival):
        raise TypeError("a trace's arrivals are read from its rows (_trace_plan), not drawn")
    sends: list[float | None]
    if spec.num_requests is not None:
        count = spec.num_requests
        if arrival.kind == "burst":
            sends = [0.0] * count
        elif arrival.kind == "closed":
            sends = [None] * count
        else:
            gaps = rng.gamma(*_gamma_shape_scale(arrival), count - 1)
            sends = [0.0, *np.cumsum(gaps).tolist()]
        return sends
    # By duration instead (WorkloadSpec allows that for closed and poisson arrivals only).
    duration_s = spec.duration_s
    if duration_s is None or arrival.kind == "burst":
        raise ValueError(f"workload {spec.name!r}: needs num_requests, or duration_s with closed or poisson arrival")
    if arrival.kind == "closed":
        return [None] * (arrival.users * math.ceil(duration_s) * CLOSED_LOOP_REQUESTS_PER_USER_SECOND)
    shape, scale = _gamma_shape_scale(arrival)
    times = np.zeros(1)
    while times[-1] < duration_s:
        # Draw about a duration's worth of gaps at a time; loop in case that falls short.
        more = rng.gamma(shape, scale, math.ceil(arrival.rate * duration_s) + 16)
        times = np.concatenate([times, times[-1] + np.cumsum(more)])
    sends = times[times < duration_s].tolist()
    return sends


def _gamma_shape_scale(arrival: PoissonArrival) -> tuple[float, float]:
    """Gamma(shape k, scale 1/(rate*k)) has mean 1/rate and coefficient of variation 1/sqrt(k)."""
    return arrival.burstiness, 1.0 / (arrival.rate * arrival.burstiness)
