"""The published configs (Hugging Face config.json contents) of the models the harness
sizes and serves: the one source of their shapes. `launchers.models` writes them into
model directories; `harness.paper.physics` derives its `ModelShape`s from them."""

from __future__ import annotations

from typing import Any

LLAMA_3_1_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "bfloat16",
}

# OPT-13B as Anyscale served it. OPT's config leaves tie_word_embeddings at the
# transformers default (True): the LM head is the token embedding.
OPT_13B_CONFIG: dict[str, Any] = {
    "architectures": ["OPTForCausalLM"],
    "model_type": "opt",
    "hidden_size": 5120,
    "ffn_dim": 20480,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "vocab_size": 50272,
    "max_position_embeddings": 2048,
    "word_embed_proj_dim": 5120,
    "do_layer_norm_before": True,
    "enable_bias": True,
    "layer_norm_elementwise_affine": True,
    "activation_function": "relu",
    "bos_token_id": 2,
    "eos_token_id": 2,
    "pad_token_id": 1,
    "torch_dtype": "float16",
}
