"""Named setups of `batchbench reproduce --preset` and `batchbench predict --preset`: a published
experiment as one name.

A preset fixes the model profile, the workloads at their full sizes, and B per system as the
experiment ran them: the static and naive baselines at their own B per workload, continuous
at the B the user gives or vLLM's own default (harness.jobs.batches). Its figures come from the
GPU setup `predict` models on paper (harness.paper.gpu_setups), so the preset, its prediction
and its published figures cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.errors import UsageError
from harness.paper.gpu_setups import ANYSCALE_OPT_13B_A100, GpuSetup

PresetName = Literal["anyscale-2023"]


@dataclass(frozen=True)
class Preset:
    """A published experiment: its model, its workloads at full size, and its static and naive B per workload."""

    name: str
    summary: str
    model: str
    # The card the experiment ran on, as `predict --gpu` names it.
    gpu: str
    workloads: tuple[str, ...]
    # B of static and naive, per workload (continuous runs at its own B).
    wave_batches: dict[str, int]

    @classmethod
    def of_setup(cls, name: str, summary: str, setup: GpuSetup, workloads: tuple[str, ...]) -> Preset:
        """The preset of `setup`'s published `workloads`, their B as the setup records them."""
        model, gpu = setup.key.split("/")
        return cls(name, summary, model, gpu, workloads,
                   {workload: setup.settings(workload).batch_size for workload in workloads})


ANYSCALE_2023 = Preset.of_setup(
    "anyscale-2023",
    "Anyscale's June 2023 throughput experiment: OPT-13B, 1,000 prompts of 512 tokens at caps 32/128/512/1536,"
    " vLLM at its own B, static and naive at 16/12/8/4",
    ANYSCALE_OPT_13B_A100,
    ("anyscale-cap32", "anyscale-cap128", "anyscale-cap512", "anyscale-cap1536"),
)

PRESETS: dict[str, Preset] = {ANYSCALE_2023.name: ANYSCALE_2023}


def find_preset(name: str) -> Preset:
    """The preset called `name`; UsageError naming the known ones."""
    preset = PRESETS.get(name)
    if preset is None:
        raise UsageError(f"--preset {name!r}: unknown; use one of {', '.join(PRESETS)}")
    return preset
