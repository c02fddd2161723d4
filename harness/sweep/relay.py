"""A job's vLLM servers up one at a time: where the cards hold only one (harness.placement), or
where --placement one-at-a-time asks for it.

The first server starts with the job. Before a run on another server, the one up is stopped and
that one started and warmed up. Each start logs under its own directory (servers/<mode>, then
servers/<mode>-2, ...), so each start's step log holds its own steps and each run reads its
steps from the start it ran on. Within a repetition the runs go server by server, the server
already up first (harness.placement.turn_order): every repetition still runs every cell once,
so runs pair by repetition as before, and two servers start R + 1 times over R repetitions.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.driver.endpoint import warm_up
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.placement import server_starts, turn_order
from harness.sweep.servers import SweepTarget, launched_target
from harness.systems import ServerMode
from launchers.handle import ServerProcess
from launchers.kinds import kind_of
from launchers.spec import ServerConfig

if TYPE_CHECKING:
    from harness.sweep.runs import SweepCell

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Slot:
    """A mode's server in a relay: where its runs go once it is up."""

    relay: Relay
    mode: ServerMode

    def live(self) -> SweepTarget:
        """The target of this mode's server, started (and the other stopped) if it is not the one up."""
        return self.relay.live(self.mode)


class Relay:
    """The servers of a job, up one at a time; every server stops when `stack` closes."""

    def __init__(self, configs: Mapping[ServerMode, ServerConfig], out: Path, stack: contextlib.ExitStack,
                 placement: str, tokenizer: str | None = None, batch_wait_s: float = 0.0) -> None:
        self.configs = dict(configs)
        self.out = out
        self.placement = placement
        self.tokenizer = tokenizer
        self.batch_wait_s = batch_wait_s
        # Starts so far per mode, in the order of first start.
        self.starts: dict[ServerMode, int] = {}
        self._up: tuple[ServerMode, ServerProcess, SweepTarget] | None = None
        stack.callback(self._stop)

    @property
    def up(self) -> ServerMode | None:
        """The mode of the server up now; None before the first start."""
        return self._up[0] if self._up else None

    def targets(self, first: ServerMode) -> dict[ServerMode, SweepTarget]:
        """Every mode's target, `first`'s server started: the others are its target until their own start
        (their runs resolve them through their slot: `SweepTarget.live`)."""
        started = self.live(first)
        return {mode: replace(started, slot=Slot(self, mode)) for mode in self.configs}

    def live(self, mode: ServerMode) -> SweepTarget:
        """The target of `mode`'s server: the one up, or started and warmed up after the one up is stopped."""
        if self._up is not None and self._up[0] == mode:
            return self._up[2]
        if self._up is not None:
            logger.info(f"one server at a time: stopping the {self._up[0]} server to start the {mode} server")
        self._stop()
        start = self.starts[mode] = self.starts.get(mode, 0) + 1
        config = self.configs[mode]
        process = kind_of(mode).launch(config, mode, self.out / "servers" / (mode if start == 1 else f"{mode}-{start}"))
        try:
            process.info.placement = f"{self.placement} (start {start} of the {mode} server)"
            process.write_info()
            target = replace(launched_target(process, config.max_num_seqs, self.tokenizer),
                             batch_wait_s=self.batch_wait_s, slot=Slot(self, mode))
            # Each start compiles its shapes afresh: its runs, like those of a server up all along, start warm.
            warm_up(target.endpoint, target.headers or {}, target.batch_size, "hello " * 8, DEFAULT_STALL_TIMEOUT_S,
                    backend=target.backend)
        except BaseException:
            process.stop()
            raise
        self._up = (mode, process, target)
        return target

    def _stop(self) -> None:
        if self._up is not None:
            self._up[1].stop()
            self._up = None


def in_turns(cells: Sequence[SweepCell]) -> list[SweepCell]:
    """One repetition's cells in the order they run: as given, or server by server where their servers are up one
    at a time (harness.placement.turn_order)."""
    slots = [cell.target.slot for cell in cells]
    relay = next((slot.relay for slot in slots if slot is not None), None)
    if relay is None:
        return list(cells)
    return [cells[index] for index in turn_order([slot.mode if slot else None for slot in slots], relay.up)]


def announce_turns(cells: Sequence[SweepCell], repetitions: int) -> None:
    """Say, before the runs, how many server starts servers up one at a time will take (nothing where they are not)."""
    slots = [cell.target.slot for cell in cells]
    relay = next((slot.relay for slot in slots if slot is not None), None)
    if relay is not None:
        starts = server_starts([slot.mode if slot else None for slot in slots], repetitions, relay.up)
        logger.info(f"one server at a time ({relay.placement}): {repetitions} repetitions, each server by server,"
                    f" the {relay.up} server up now: {starts} server starts ahead")


def placement_caveat(runs: Sequence[Path]) -> str | None:
    """The report's line on servers placed one at a time, from the runs' manifests: how often each server started,
    and that each run's steps are its own start's; None where they were not."""
    starts: dict[str, set[int]] = {}
    placement = None
    for run in runs:
        server = json.loads((run / "manifest.json").read_text()).get("server") or {}
        if "one at a time" in (server.get("placement") or ""):
            placement = server["placement"].split(" (start ")[0]
            starts.setdefault(server["mode"], set()).add(server["pid"])
    if placement is None:
        return None
    counts = ", ".join(f"{mode} {len(pids)}" for mode, pids in starts.items())
    total = sum(len(pids) for pids in starts.values())
    return (f"Servers placed {placement}. Each system's server was started alone, warmed up, and stopped before the"
            f" other's: the runs ran on {total} server starts ({counts}; the first up before the first run, so"
            f" {total - 1} restarts between runs), each repetition server by server so that runs still pair by"
            " repetition. Each start wrote its own step log: every run's steps are those of the start it ran on.")
