"""What a distributed run's master and workers say to each other, over Locust's own channel.

Locust's MasterRunner and WorkerRunner carry these as custom messages (ZeroMQ, msgpack),
beside Locust's own spawn, heartbeat and stats messages. In order of a run:

- master -> worker `ASSIGN` (a `Brief`: the endpoint, the worker's share of the plan);
- worker -> master `PING`, master -> worker `PONG`: the worker estimates its clock's
  offset from the master's (harness.driver.distributed.clock), unless both share one host;
- worker -> master `READY`; then Locust spawns the users, and the master sends `START`
  with the run's start instant t0, on its own clock;
- while the run goes: worker -> master `ROWS` (each journal flush: its records and
  per-token times, as JSON lines); for a closed loop or naive waves, worker -> master
  `NEXT` (a user wants an item) and master -> worker `ITEM`, worker -> master `FINISHED`;
- worker -> master `DONE` once its share is done (or `STOP` told it to stop: Ctrl-C).

Token times travel as raw JSON lines, never through Locust's stats, which round times.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.driver.work import WorkItem
from harness.rundir.manifest import ClientHealth

ASSIGN = "bb_assign"
PING = "bb_ping"
PONG = "bb_pong"
READY = "bb_ready"
START = "bb_start"
ROWS = "bb_rows"
NEXT = "bb_next"
ITEM = "bb_item"
FINISHED = "bb_finished"
STOP = "bb_stop"
DONE = "bb_done"

# Locust's own default master port.
DEFAULT_MASTER_PORT = 5557


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Brief(_Message):
    """What a worker needs to send its share of one run (`ASSIGN`)."""

    index: int = Field(description="the worker's 0-based place among the run's workers")
    base_url: str = Field(description="the server under test")
    headers: dict[str, str] = Field(description="HTTP headers of every request (a bearer token, if any)")
    model: str = Field(description="served model name")
    endpoint: str = Field(description="completions or chat")
    run_tag: str = Field(description="tag inside every X-Request-Id")
    first_byte_timeout_s: float = Field(description="--first-byte-timeout-s")
    stall_timeout_s: float = Field(description="--stall-timeout-s")
    users: int = Field(description="the run's users over all workers: bounds this worker's connections")
    central: bool = Field(description="items are handed out by the master one by one (closed loop, naive waves)")
    items: list[dict[str, Any]] = Field(description="the worker's own share of the plan (open loop), as WorkItems")


class Ready(_Message):
    """A worker is set up and knows its clock (`READY`)."""

    name: str = Field(description="host:pid, its rows' worker column")
    clock_offset_s: float = Field(description="its clock minus the master's")
    round_trip_s: float = Field(description="round trip of the estimate's best exchange; 0 when not estimated")


class Done(_Message):
    """A worker's account of its share, after its last rows (`DONE`)."""

    name: str = Field(description="host:pid")
    sent: int = Field(description="requests it sent")
    handed_out: list[int] = Field(description="request ids its users took (sent, or cut off in flight)")
    health: ClientHealth = Field(description="its CPU share and loop lag over the run")
    interrupted: bool = Field(description="it stopped before its share was done (STOP, Ctrl-C)")


def item_to_wire(item: WorkItem) -> dict[str, Any]:
    """A work item as a msgpack-able dict."""
    return asdict(item)


def item_from_wire(data: dict[str, Any]) -> WorkItem:
    """The work item a dict of `item_to_wire` describes."""
    return WorkItem(**data)


def parse_address(text: str, default_port: int = DEFAULT_MASTER_PORT) -> tuple[str, int]:
    """`HOST[:PORT]` (an IPv6 host in brackets) as (host, port); ValueError saying what is wrong.

    The host must resolve: a typo is refused here, before anything heavy starts.
    """
    host, port_text = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not HOST[:PORT]")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    port = default_port
    if port_text:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    if not host:
        raise ValueError(f"{text!r} names no host (expected HOST[:PORT])")
    try:
        socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValueError(f"{text!r}: cannot resolve host {host!r}") from exc
    return host, port


def is_loopback(host: str) -> bool:
    """True when `host` names this machine's loopback interface (one clock on both ends)."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, UnicodeError):
        return False
    return all(ipaddress.ip_address(str(address).split("%")[0]).is_loopback for address in addresses)
