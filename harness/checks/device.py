"""Which GPU this machine has, and the on-paper setup (harness.paper.gpu_setups) it is predicted on.

The GPU is found by name through `nvidia-smi` (it comes with every NVIDIA driver, and
asking it costs no CUDA context in this process). No GPU, or no `nvidia-smi`: None.

A known card (H100, H200, A100 40/80 GB) serving the `llama-3.1-8b` profile gets the
setup of the seed's H100 prediction with this card's bandwidth, FLOP/s and memory, the
KV room of the memory share each server gets here, and vLLM's default token budget for
the card. Anything else has no setup, and the prediction is skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from harness.paper.gpu_setups import SEED_LLAMA_3_1_8B_H100, Constant, GpuSetup
from harness.paper.physics import (
    A100_40GB,
    A100_80GB,
    H100_SXM_80GB,
    GpuSpec,
    MemoryAllowance,
    ModelShape,
    model_card,
)
from launchers import PROFILES

H200 = GpuSpec(name="H200 141GB", memory_bandwidth_bytes_per_s=4.8e12, peak_flops=989e12, memory_bytes=141e9)
HARDWARE_SOURCES = {
    H100_SXM_80GB.name: SEED_LLAMA_3_1_8B_H100.hardware_source,
    H200.name: "NVIDIA H200 datasheet: 4.8 TB/s HBM3e, 141 GB, 989 TFLOP/s dense BF16 tensor core (the H100's)",
    A100_80GB.name: "NVIDIA A100 datasheet: 2,039 GB/s HBM2e (80 GB SXM), 312 TFLOP/s dense BF16 tensor core",
    A100_40GB.name: "NVIDIA A100 datasheet: 1,555 GB/s HBM2, 312 TFLOP/s dense BF16 tensor core",
}
# An A100 is told apart by its memory: anything above this is the 80 GB board.
A100_80GB_ABOVE_BYTES = 60e9
# vLLM 0.32's OpenAI-server token budget per step (EngineArgs.get_batch_defaults): 8192 on
# a >= 70 GiB card that is not an A100, 2048 otherwise; >= 160 GiB cards (none here) get 16384.
BUDGET_SOURCE = "vLLM 0.32's default for the OpenAI server on this card (EngineArgs.get_batch_defaults)"
QUERY = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class FoundGpu:
    """The first GPU `nvidia-smi` lists: its name and memory."""

    name: str
    memory_bytes: float

    @property
    def spec(self) -> GpuSpec | None:
        """The spec sheet of this card, if it is one the predictions know."""
        upper = self.name.upper()
        if "H200" in upper:
            return H200
        if "H100" in upper:
            return H100_SXM_80GB
        if "A100" in upper:
            return A100_80GB if self.memory_bytes > A100_80GB_ABOVE_BYTES else A100_40GB
        return None


def detect_gpu() -> FoundGpu | None:
    """The first GPU of this machine, or None when there is none (or no NVIDIA driver)."""
    if shutil.which(QUERY[0]) is None:
        return None
    try:
        result = subprocess.run(QUERY, capture_output=True, text=True, timeout=30, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    return parse_query(result.stdout)


def parse_query(stdout: str) -> FoundGpu | None:
    """The first GPU of `nvidia-smi --query-gpu=name,memory.total` output (memory in MiB); None if there is none."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    name, _, mib = lines[0].rpartition(",")
    try:
        return FoundGpu(name.strip(), float(mib) * 2**20)
    except ValueError:
        return None


def predicted_setup(model: str, gpu: GpuSpec, memory_share: float) -> GpuSetup | None:
    """The setup `model` is predicted on when served on `gpu` with `memory_share` of its memory (None: none).

    ValueError (from physics.model_card) when the share leaves no room for a KV cache.
    """
    base = SEED_LLAMA_3_1_8B_H100
    if model != base.key.split("/")[0]:
        return None
    card = model_card(base.model, gpu, MemoryAllowance(gpu_memory_utilization=memory_share))
    budget = 2048 if "A100" in gpu.name else 8192
    return base.model_copy(update={
        "key": f"{model}/{gpu.name}",
        "gpu": gpu,
        "hardware_source": HARDWARE_SOURCES[gpu.name],
        "kv_cache_bytes": Constant(
            value=card.kv_cache_bytes_available,
            source=f"physics.model_card at --gpu-memory-utilization {memory_share} (two servers share the card)",
        ),
        "max_num_batched_tokens": Constant(value=budget, source=BUDGET_SOURCE),
        "workloads": {},
    })


def check_fits(model: str, gpu: FoundGpu, memory_share: float) -> None:
    """ValueError when a model profile's weights leave no KV room in `memory_share` of a known card.

    Two servers share the card, so a card too small (an A100 40GB for Llama-3.1-8B) is
    refused before anything starts. Unknown cards and models that are not profiles pass.
    """
    profile = PROFILES.get(model)
    if gpu.spec is None or profile is None:
        return
    shape = ModelShape.from_hf_config(profile.name, profile.config)
    try:
        model_card(shape, gpu.spec, MemoryAllowance(gpu_memory_utilization=memory_share))
    except ValueError as exc:
        raise ValueError(f"{gpu.name}: two servers of {model} at {memory_share:.0%} of its memory each"
                         f" do not fit ({exc})") from None
