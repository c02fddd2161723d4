"""B per system: one B for every system (the fair comparison), or a preset's B per system and workload.

The fair comparison runs continuous, static and naive at one B, so that admission is the only
difference. A published experiment ran each at its own B: vLLM at its default, the static
baselines at what their memory allowed per workload. `SystemBatches` says which B each
(system, workload) runs at, and the job's servers follow it: static at a B per workload is a
static server per B, each up only while its workloads run (`wave_groups`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.errors import UsageError
from harness.jobs.presets import Preset
from harness.systems import WAVE_SYSTEMS

_GIB = 2**30
# The systems whose B is a preset's per workload: static's batch and the client's waves.
PER_WORKLOAD_SYSTEMS = ("static", *WAVE_SYSTEMS)


@dataclass(frozen=True)
class SystemBatches:
    """Which B each system runs each workload at."""

    # continuous's B, and every system's where `waves` names no B for the workload.
    continuous: int
    # Where `continuous` comes from, in words.
    continuous_why: str = "--max-num-seqs"
    # B of static and the wave systems per workload (a preset's).
    waves: dict[str, int] = field(default_factory=dict)

    def of(self, system: str, workload: str) -> int:
        """B of `system` on `workload`."""
        if system in PER_WORKLOAD_SYSTEMS:
            return self.waves.get(workload, self.continuous)
        return self.continuous

    def wave(self, workload: str) -> int:
        """B of static and naive on `workload`."""
        return self.of("static", workload)

    @property
    def uniform(self) -> bool:
        """Whether every system runs every workload at one B."""
        return all(batch == self.continuous for batch in self.waves.values())

    def wave_groups(self, workloads: Sequence[str]) -> list[tuple[int, tuple[str, ...]]]:
        """The workloads grouped by their static B, groups and workloads in the order given: one static
        server per group."""
        groups: dict[int, list[str]] = {}
        for workload in workloads:
            groups.setdefault(self.wave(workload), []).append(workload)
        return [(batch, tuple(names)) for batch, names in groups.items()]

    def largest_wave(self, workloads: Sequence[str]) -> int:
        """The widest static batch over `workloads`."""
        return max((self.wave(workload) for workload in workloads), default=self.continuous)

    def line(self, workloads: Sequence[str]) -> str:
        """Each system's B in one line, for the plan line and the report."""
        if self.uniform:
            return f"B = {self.continuous} for every system ({self.continuous_why})"
        waves = ", ".join(f"{self.wave(workload)} ({workload})" for workload in workloads)
        return (f"B per system: continuous {self.continuous} ({self.continuous_why}); static and naive per workload:"
                f" {waves}")


def uniform_batches(batch_size: int) -> SystemBatches:
    """One B for every system: the fair comparison."""
    return SystemBatches(batch_size)


def preset_batches(preset: Preset, workloads: Sequence[str], given: int | None,
                   cards: Sequence[tuple[str, int]]) -> SystemBatches:
    """`preset`'s B per system on `workloads`: continuous at `given` (--max-num-seqs) or vLLM's own default on
    `cards`.

    UsageError for a workload the preset gives no B, and where continuous's B is below a naive
    B: naive's waves run on the continuous server, and a wave wider than its B would not run as one batch.
    """
    unknown = [workload for workload in workloads if workload not in preset.wave_batches]
    if unknown:
        raise UsageError(f"--workloads {unknown[0]}: {preset.name} sets static and naive B for"
                         f" {', '.join(preset.wave_batches)} only")
    if given is None:
        continuous, why = vllm_default_max_num_seqs(cards)
    else:
        continuous, why = given, "--max-num-seqs"
    widest = max(preset.wave_batches, key=lambda workload: preset.wave_batches[workload])
    if continuous < preset.wave_batches[widest]:
        raise UsageError(f"--max-num-seqs {continuous}: below {preset.name}'s naive B of"
                         f" {preset.wave_batches[widest]} at {widest}, whose waves run on the continuous server:"
                         f" give at least {preset.wave_batches[widest]}")
    return SystemBatches(continuous, why, dict(preset.wave_batches))


def vllm_default_max_num_seqs(cards: Sequence[tuple[str, int]]) -> tuple[int, str]:
    """vLLM's own max_num_seqs for its OpenAI server on `cards` (none: the CPU build), and why, in words.

    vLLM's rule (EngineArgs.get_batch_defaults, 0.30-0.34): 1,024 on a card of 160 GiB or more,
    or of 70 GiB or more that is not an A100; 256 on any other GPU; 128 on the CPU. Given
    explicitly, B is known to the harness and recorded, and the server runs as it would by default.
    """
    if not cards:
        return 128, "vLLM's own default on the CPU"
    name, memory = min(cards, key=lambda card: card[1])
    large = memory >= 160 * _GIB or (memory >= 70 * _GIB and "a100" not in name.lower())
    return (1024 if large else 256), f"vLLM's own default on {name} of {memory / _GIB:.0f} GiB"
