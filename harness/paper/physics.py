"""Decode physics on paper: why adding sequences to a decode step is nearly free.

A decode step reads every weight once whatever the batch size, while its compute grows
with the batch. Until the batch reaches the crossover where compute time equals weight
reading time, extra sequences ride along on memory traffic already paid for; the KV
cache room left beside the weights bounds how many sequences fit at all.

Byte conventions: sizes are decimal (1 GB = 1e9 bytes), as GPU spec sheets print them;
KV-per-token figures are exact byte counts (131072 bytes = 128 KiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.paper.model_configs import LLAMA_3_1_8B_CONFIG, OPT_13B_CONFIG

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class ModelShape(BaseModel):
    """The shape of a decoder-only transformer, enough to size its weights and KV cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Human-readable model name, e.g. 'Llama-3.1-8B'.")
    architecture: Literal["llama", "opt"] = Field(
        description="Layer layout used to count parameters: llama (gated MLP, RMSNorm, no biases, "
        "rotary positions) or opt (biased projections, LayerNorm, learned positions)."
    )
    num_layers: int = Field(gt=0, description="Number of transformer decoder layers.")
    hidden_size: int = Field(gt=0, description="Width of the residual stream.")
    num_attention_heads: int = Field(gt=0, description="Query heads per layer.")
    num_kv_heads: int = Field(gt=0, description="Key/value heads per layer (fewer than query heads under GQA).")
    head_dim: int = Field(
        gt=0, description="Width of one attention head; defaults to hidden_size / num_attention_heads."
    )
    intermediate_size: int = Field(gt=0, description="Width of the MLP's hidden layer (FFN dimension).")
    vocab_size: int = Field(gt=0, description="Rows of the token embedding (and of the LM head).")
    max_position_embeddings: int = Field(
        gt=0, description="Longest supported context; OPT learns one embedding per position, Llama uses rotary."
    )
    tie_word_embeddings: bool = Field(description="Whether the LM head shares the token embedding's weights.")
    dtype_bytes: int = Field(gt=0, description="Bytes per weight and per KV element: 2 for BF16/FP16.")
    num_parameters_override: int | None = Field(
        default=None, gt=0, description="Published parameter count to use instead of counting from the shape."
    )

    @classmethod
    def from_hf_config(cls, name: str, config: Mapping[str, Any]) -> ModelShape:
        """The shape a Hugging Face config.json describes (llama and opt model types).

        Absent keys take transformers' defaults: as many KV heads as query heads, tied
        embeddings, head_dim = hidden_size / heads.
        """
        return cls(
            name=name,
            architecture=config["model_type"],
            num_layers=config["num_hidden_layers"],
            hidden_size=config["hidden_size"],
            num_attention_heads=config["num_attention_heads"],
            num_kv_heads=config.get("num_key_value_heads", config["num_attention_heads"]),
            head_dim=config.get("head_dim"),
            # Llama names the MLP width intermediate_size, OPT ffn_dim.
            intermediate_size=config.get("intermediate_size", config.get("ffn_dim")),
            vocab_size=config["vocab_size"],
            max_position_embeddings=config["max_position_embeddings"],
            tie_word_embeddings=config.get("tie_word_embeddings", True),
            dtype_bytes=_DTYPE_BYTES[config["torch_dtype"]],
        )

    @model_validator(mode="before")
    @classmethod
    def _default_head_dim(cls, data: Any) -> Any:
        """Fill head_dim from hidden_size / num_attention_heads when not given."""
        if isinstance(data, dict) and data.get("head_dim") is None:
            hidden, heads = data.get("hidden_size"), data.get("num_attention_heads")
            if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
                if hidden % heads:
                    raise ValueError("head_dim: hidden_size is not a multiple of num_attention_heads; give head_dim")
                data = {**data, "head_dim": hidden // heads}
        return data

    @property
    def num_parameters(self) -> int:
        """The override if given, else the parameter count implied by the shape."""
        if self.num_parameters_override is not None:
            return self.num_parameters_override
        return _count_parameters(self)


class GpuSpec(BaseModel):
    """The three numbers of a GPU that bound decode: bandwidth, compute, memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Human-readable GPU name.")
    memory_bandwidth_bytes_per_s: float = Field(gt=0, description="Peak HBM bandwidth in bytes per second.")
    peak_flops: float = Field(gt=0, description="Dense (no sparsity) BF16/FP16 tensor-core FLOP/s.")
    memory_bytes: float = Field(
        gt=0, description="HBM capacity in decimal bytes as the spec sheet prints it (80 GB = 80e9)."
    )


class MemoryAllowance(BaseModel):
    """How vLLM splits GPU memory: KV cache = total x utilization - weights - the rest.

    The rest is two profiled terms: the activation peak of a forward pass at
    max_num_batched_tokens (CUDA graph buffers included), and memory outside PyTorch's
    allocator (CUDA context, NCCL, cuBLAS workspaces). The defaults are typical of an
    8B-class model at vLLM's default settings; with utilization 0.9 they give Llama-3.1-8B
    on an H100 80 GB the ~53 GB of cache room usually quoted (72 - 16 - 3).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_memory_utilization: float = Field(
        default=0.9, gt=0, le=1, description="Fraction of GPU memory vLLM may use (its --gpu-memory-utilization)."
    )
    activation_peak_bytes: float = Field(
        default=2.5e9, ge=0, description="Peak activation memory of one forward pass, CUDA graph buffers included."
    )
    non_torch_bytes: float = Field(
        default=0.5e9, ge=0, description="Memory outside PyTorch's allocator: CUDA context, NCCL, cuBLAS workspaces."
    )


class ModelCard(BaseModel):
    """The decode numbers of one model on one GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="ModelShape.name.")
    gpu: str = Field(description="GpuSpec.name.")
    num_parameters: int = Field(description="Parameters, counted from the shape unless overridden.")
    weight_bytes: int = Field(description="num_parameters x dtype_bytes.")
    kv_bytes_per_token: int = Field(description="2 (K and V) x layers x kv_heads x head_dim x dtype_bytes.")
    decode_step_floor_s: float = Field(
        description="weight_bytes / bandwidth: one step can never beat reading every weight once."
    )
    flops_per_token: float = Field(description="2 x num_parameters: one multiply-add per weight per token.")
    crossover_batch: float = Field(
        description="Batch at which a step's matmul compute time equals its weight-reading time (KV reads ignored)."
    )
    allowance: MemoryAllowance = Field(description="The memory split assumed for the KV cache room.")
    kv_cache_bytes_available: float = Field(
        description="memory x utilization - weights - activation peak - non-torch memory."
    )
    kv_tokens_capacity: int = Field(description="Whole tokens of KV cache that fit in kv_cache_bytes_available.")


LLAMA_3_1_8B = ModelShape.from_hf_config("Llama-3.1-8B", LLAMA_3_1_8B_CONFIG)
OPT_13B = ModelShape.from_hf_config("OPT-13B", OPT_13B_CONFIG)

# Spec-sheet figures. The H100's "80 GB" board reports ~81,559 MiB (8.55e10 bytes) to
# nvidia-smi; taking the printed 80e9 keeps derived capacities on the conservative side.
H100_SXM_80GB = GpuSpec(
    name="H100 SXM 80GB", memory_bandwidth_bytes_per_s=3.35e12, peak_flops=989e12, memory_bytes=80e9
)
A100_40GB = GpuSpec(name="A100 40GB", memory_bandwidth_bytes_per_s=1.555e12, peak_flops=312e12, memory_bytes=40e9)
A100_80GB = GpuSpec(name="A100 80GB", memory_bandwidth_bytes_per_s=2.039e12, peak_flops=312e12, memory_bytes=80e9)

# OPT's learned position table has two extra rows: positions are offset by 2.
_OPT_POSITION_OFFSET = 2


def model_card(model: ModelShape, gpu: GpuSpec, allowance: MemoryAllowance | None = None) -> ModelCard:
    """Derive the decode numbers of `model` on `gpu` under the memory `allowance`.

    Raises ValueError when the weights and allowance leave no room for a KV cache.
    """
    allowance = allowance or MemoryAllowance()
    params = model.num_parameters
    weight_bytes = params * model.dtype_bytes
    flops_per_token = 2.0 * params
    kv_per_token = kv_bytes_per_token(model)
    usable = gpu.memory_bytes * allowance.gpu_memory_utilization
    available = usable - weight_bytes - allowance.activation_peak_bytes - allowance.non_torch_bytes
    if available <= 0:
        raise ValueError(
            f"model: {model.name} needs {weight_bytes / 1e9:.1f} GB of weights plus allowances, "
            f"more than the {usable / 1e9:.1f} GB usable on {gpu.name}"
        )
    return ModelCard(
        model=model.name,
        gpu=gpu.name,
        num_parameters=params,
        weight_bytes=weight_bytes,
        kv_bytes_per_token=kv_per_token,
        decode_step_floor_s=weight_bytes / gpu.memory_bandwidth_bytes_per_s,
        flops_per_token=flops_per_token,
        # weight_bytes / bandwidth == batch * flops_per_token / peak_flops, solved for batch.
        crossover_batch=gpu.peak_flops * weight_bytes / (gpu.memory_bandwidth_bytes_per_s * flops_per_token),
        allowance=allowance,
        kv_cache_bytes_available=available,
        kv_tokens_capacity=int(available // kv_per_token),
    )


def kv_bytes_per_token(model: ModelShape) -> int:
    """Bytes of KV cache one token occupies: a K and a V vector per KV head per layer."""
    return 2 * model.num_layers * model.num_kv_heads * model.head_dim * model.dtype_bytes


def embedding_parameters(model: ModelShape) -> int:
    """Weights of the lookup tables a token only indexes (no multiply): the token embedding,
    and OPT's learned position table. A tied LM head multiplies the token embedding,
    but once per sampled sequence, not per token."""
    positions = (model.max_position_embeddings + _OPT_POSITION_OFFSET) * model.hidden_size
    return model.vocab_size * model.hidden_size + (positions if model.architecture == "opt" else 0)


def roofline_step_cost_s(model: ModelShape, gpu: GpuSpec, batch: int, context_tokens: int = 0) -> float:
    """Roofline seconds of one decode step of `batch` sequences, each `context_tokens` long.

    max(memory time, compute time): memory reads every weight once plus each sequence's
    KV cache; compute is 2 FLOPs per weight per sequence plus attention over the context
    (QK^T and AV: 4 x layers x heads x head_dim FLOPs per context token).
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch: must be a positive integer, got {batch!r}")
    if isinstance(context_tokens, bool) or not isinstance(context_tokens, int) or context_tokens < 0:
        raise ValueError(f"context_tokens: must be a non-negative integer, got {context_tokens!r}")
    weight_bytes = model.num_parameters * model.dtype_bytes
    kv_bytes = batch * context_tokens * kv_bytes_per_token(model)
    memory_s = (weight_bytes + kv_bytes) / gpu.memory_bandwidth_bytes_per_s
    attention_flops = 4 * model.num_layers * model.num_attention_heads * model.head_dim * context_tokens
    compute_s = batch * (2.0 * model.num_parameters + attention_flops) / gpu.peak_flops
    return max(memory_s, compute_s)


def _count_parameters(model: ModelShape) -> int:
    """Count weights (and biases, for OPT) layer by layer from the shape."""
    h, ffn = model.hidden_size, model.intermediate_size
    q_width = model.num_attention_heads * model.head_dim
    kv_width = model.num_kv_heads * model.head_dim
    embedding = model.vocab_size * h
    lm_head = 0 if model.tie_word_embeddings else model.vocab_size * h
    if model.architecture == "llama":
        attention = h * q_width + 2 * h * kv_width + q_width * h
        mlp = 3 * h * ffn  # gate, up and down projections
        norms = 2 * h  # two RMSNorm weight vectors
        per_layer = attention + mlp + norms
        return embedding + lm_head + model.num_layers * per_layer + h  # + final RMSNorm
    attention = (h * q_width + q_width) + 2 * (h * kv_width + kv_width) + (q_width * h + h)
    mlp = (h * ffn + ffn) + (ffn * h + h)
    norms = 2 * 2 * h  # two LayerNorms, weight and bias each
    per_layer = attention + mlp + norms
    positions = (model.max_position_embeddings + _OPT_POSITION_OFFSET) * h
    return embedding + positions + lm_head + model.num_layers * per_layer + 2 * h  # + final LayerNorm
