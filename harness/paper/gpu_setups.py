"""The GPU setups `batchbench predict` knows: hardware, engine constants, and their sources.

A setup is one model on one GPU behind one engine. Every constant of the step-cost
model (harness.paper.gpu_cost) and of the engine's limits
(harness.paper.gpu_schedule) is given once per setup, with where it comes from: a
spec sheet, a paper, or a named measurement. Nothing is fitted, and nothing varies
with the workload except what the published experiment itself set per workload (its
`max_num_batched_tokens` and its naive batch sizes), which sits in `WorkloadSettings`
with the published figures.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.paper.physics import (
    A100_40GB,
    H100_SXM_80GB,
    LLAMA_3_1_8B,
    OPT_13B,
    GpuSpec,
    ModelShape,
    kv_bytes_per_token,
    model_card,
)

_GIB = 2**30


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Constant(_Frozen):
    """One number of the model and where it comes from."""

    value: float = Field(ge=0, description="The value, in the unit its name says.")
    source: str = Field(min_length=1, description="Spec sheet, paper or named measurement it is taken from.")


class WorkloadSettings(_Frozen):
    """What a published experiment set for one workload, and what it measured."""

    max_num_batched_tokens: int | None = Field(
        None, gt=0, description="The engine's token budget per step; None: the setup's default."
    )
    batch_size: int = Field(gt=0, description="B of the static and naive systems.")
    published_continuous_tok_s: float | None = Field(
        None, gt=0, description="Published vLLM throughput, (prompt + generated tokens) / wall time."
    )
    published_naive_tok_s: float | None = Field(
        None, gt=0, description="Published naive (HF pipelines, padded) throughput, same definition."
    )
    source: str = Field("", description="Where the settings and figures are published.")


class GpuSetup(_Frozen):
    """One model on one GPU behind one engine, with every constant the prediction uses."""

    key: str = Field(description="'<model profile>/<gpu>', as the CLI names them.")
    engine: str = Field(description="The serving engine and how it was driven.")
    model: ModelShape = Field(description="The model's shape (weights, KV per token, FLOPs).")
    gpu: GpuSpec = Field(description="Bandwidth, dense FLOP/s and memory of the card.")
    hardware_source: str = Field(description="Where the GPU's bandwidth and FLOP/s come from.")
    efficiency: Constant = Field(description="Achieved / peak FLOP/s, one factor for every step.")
    overhead_s: Constant = Field(description="Fixed seconds added to every engine step.")
    kv_cache_bytes: Constant = Field(description="Bytes of KV cache the engine holds.")
    max_num_seqs: Constant | None = Field(
        description="Sequences the continuous engine may run at once; None: the batch size B."
    )
    max_num_batched_tokens: Constant = Field(description="Token budget per step unless a workload sets its own.")
    block_size: int = Field(16, gt=0, description="Tokens per KV block (vLLM's default 16).")
    watermark: float = Field(0.01, ge=0, lt=1, description="Share of blocks admission leaves free (vLLM: 1%).")
    preemption: str = Field(description="What the engine does when the cache is full.")
    default_batch_size: int = Field(gt=0, description="B for a workload without settings here.")
    workloads: dict[str, WorkloadSettings] = Field(description="Per-workload settings and published figures.")

    def settings(self, workload: str) -> WorkloadSettings:
        """The published settings of `workload`, or the setup's defaults."""
        return self.workloads.get(workload, WorkloadSettings(batch_size=self.default_batch_size))

    @property
    def kv_tokens(self) -> int:
        """Whole tokens of KV cache."""
        return int(self.kv_cache_bytes.value // kv_bytes_per_token(self.model))


_ANYSCALE_CONFIG = (
    "anyscale/llm-continuous-batching-benchmarks, benchmark_configs/vllm_variable_size and "
    "naive_hf_variable_size; figures from Anyscale's blog 'How continuous batching enables 23x throughput in "
    "LLM inference while reducing p50 latency' (June 2023)"
)
_ANYSCALE_LATENCY_CONFIG = (
    "anyscale/llm-continuous-batching-benchmarks, benchmark_configs/vllm_variable_size_latency (vLLM: "
    "--max-num-batched-tokens 8100, QPS 8, 16 and 32, 5,000 prompts each) and ray_static_variable_size_latency "
    "(the 'impatient_static' policy of launch_scripts/launch_ray_dynamic_gen: a batch of whoever waits, up to "
    "--static-batch-size 4 for outputs capped at 1,536, QPS 4, 100 prompts). The blog's latency results are "
    "plots; no figure of them is sourced here"
)
_MEGATRON_EFFICIENCY = Constant(
    value=0.52,
    source="Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
    "Megatron-LM' (SC'21): 163 TFLOP/s per A100, 52% of its 312 TFLOP/s peak, measured",
)

ANYSCALE_OPT_13B_A100 = GpuSetup(
    key="opt-13b/a100-40gb",
    engine="vLLM 0.1 (June 2023) behind the benchmark's own FastAPI server loop",
    model=OPT_13B,
    gpu=A100_40GB,
    hardware_source="NVIDIA A100 datasheet: 1,555 GB/s HBM2, 312 TFLOP/s dense FP16 tensor core",
    efficiency=_MEGATRON_EFFICIENCY,
    overhead_s=Constant(
        value=0.014,
        source="10 ms: the benchmark's engine thread sleeps 10 ms before every engine step "
        "(launch_scripts/launch_vllm, time.sleep(0.01)); + 4 ms: vLLM's own CPU work between decode steps, "
        "'about 4ms of GPU bubble' per decode step in the profile of vllm-project/vllm#6854 (vLLM 0.5, 2024)",
    ),
    kv_cache_bytes=Constant(
        value=12 * _GIB,
        source="vLLM paper (Kwon et al., SOSP'23), Table 1: OPT-13B on one A100 40GB, 12 GB of KV cache, "
        "15.7K token slots (12 GiB / 800 KiB per token). Cross-check: vLLM 0.1's own rule, "
        "0.9 x 39.59 GiB (the card's size as CUDA reports it) - 25.7 GB of weights - ~1 GB activation peak, "
        "gives ~11.5 GB",
    ),
    max_num_seqs=Constant(value=256, source="vLLM 0.1 default (EngineArgs.max_num_seqs); the benchmark keeps it"),
    max_num_batched_tokens=Constant(value=2560, source="vLLM 0.1 default (EngineArgs.max_num_batched_tokens)"),
    preemption="preempt the most recently admitted sequence by recompute (vLLM 0.1's default for single "
    "sequences); no swapping",
    default_batch_size=16,
    workloads={
        "anyscale-cap32": WorkloadSettings(
            max_num_batched_tokens=8700, batch_size=16, published_continuous_tok_s=6121, source=_ANYSCALE_CONFIG
        ),
        "anyscale-cap128": WorkloadSettings(
            max_num_batched_tokens=7500, batch_size=12, published_continuous_tok_s=3592, source=_ANYSCALE_CONFIG
        ),
        "anyscale-cap512": WorkloadSettings(
            max_num_batched_tokens=8100, batch_size=8, published_continuous_tok_s=2029, source=_ANYSCALE_CONFIG
        ),
        "anyscale-cap1536": WorkloadSettings(
            max_num_batched_tokens=8100, batch_size=4, published_continuous_tok_s=1898, published_naive_tok_s=81,
            source=_ANYSCALE_CONFIG,
        ),
        "anyscale-latency": WorkloadSettings(max_num_batched_tokens=8100, batch_size=4,
                                             source=_ANYSCALE_LATENCY_CONFIG),
    },
)

_LLAMA_H100_CARD = model_card(LLAMA_3_1_8B, H100_SXM_80GB)

SEED_LLAMA_3_1_8B_H100 = GpuSetup(
    key="llama-3.1-8b/h100",
    engine="vLLM as batchbench launches it on a GPU (async scheduling on, --max-num-seqs B)",
    model=LLAMA_3_1_8B,
    gpu=H100_SXM_80GB,
    hardware_source="NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3, 989 TFLOP/s dense BF16 tensor core",
    efficiency=_MEGATRON_EFFICIENCY,
    overhead_s=Constant(
        value=0.0,
        source="assumed 0: async scheduling prepares step n+1 on the CPU while the GPU runs step n, which hides "
        "the per-step CPU work",
    ),
    kv_cache_bytes=Constant(
        value=_LLAMA_H100_CARD.kv_cache_bytes_available,
        source="physics.model_card: 80 GB x 0.9 - 16.06 GB of weights - 2.5 GB activation peak - 0.5 GB "
        "non-torch (the seed's ~53 GB)",
    ),
    max_num_seqs=None,
    max_num_batched_tokens=Constant(
        value=8192, source="vLLM's default for the OpenAI server on a >= 70 GiB GPU other than the A100 "
        "(EngineArgs.get_batch_defaults)"
    ),
    preemption="preempt the most recently admitted sequence by recompute (vLLM's default); no swapping",
    default_batch_size=256,
    workloads={"seed-100-200-300-1000": WorkloadSettings(batch_size=256, source="the seed: B = 256 on an H100")},
)

SETUPS: dict[str, GpuSetup] = {s.key: s for s in (ANYSCALE_OPT_13B_A100, SEED_LLAMA_3_1_8B_H100)}
MODELS = tuple(sorted({key.split("/")[0] for key in SETUPS}))
GPUS = tuple(sorted({key.split("/")[1] for key in SETUPS}))


def setup_for_profile(model: str) -> GpuSetup | None:
    """The setup a served model profile is predicted on (its published GPU), if it has one."""
    matches = [setup for key, setup in SETUPS.items() if key.split("/")[0] == model]
    return matches[0] if matches else None


def find_setup(model: str, gpu: str) -> GpuSetup:
    """The setup of `model` on `gpu`; ValueError naming the known pairs if there is none."""
    setup = SETUPS.get(f"{model}/{gpu}")
    if setup is None:
        raise ValueError(f"no setup for model {model!r} on gpu {gpu!r}: known pairs are {', '.join(SETUPS)}")
    return setup
