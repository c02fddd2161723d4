"""The GPU prediction on paper, laid out: `batchbench predict` prints these blocks, and the
report shows them when its runs served a GPU model profile.

Every assumption behind the numbers is stated beside them: bandwidth, FLOP/s,
efficiency, overhead, the KV allowance, the engine's limits, and how a step mixes
prefill and decode.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.paper.gpu_predict import SENSITIVITY_STEP, PaperPrediction, SensitivityRow
from harness.paper.gpu_setups import GpuSetup
from harness.paper.physics import kv_bytes_per_token
from harness.report.document import Block, Bullets, Heading, Paragraph, Table
from harness.report.format import ms, num, pct, times


def prediction_blocks(
    predictions: Sequence[PaperPrediction], sensitivity: Sequence[SensitivityRow] = ()
) -> list[Block]:
    """The prediction table, the naive note, the schedule, every assumption and (if given) the sensitivity.

    `predictions` are of one setup, at least one (ValueError otherwise).
    """
    if not predictions or any(p.setup != predictions[0].setup for p in predictions):
        raise ValueError("predictions: give at least one, all on the same GPU setup")
    setup = predictions[0].setup
    blocks: list[Block] = [
        Heading(f"Predicted on paper: {setup.model.name} on {setup.gpu.name}"),
        Paragraph(
            f"Engine: {setup.engine}. Throughput counts prompt plus generated tokens per second of wall time "
            "(Anyscale's definition). continuous and static at B are vLLM schedules simulated block by block; "
            "naive padded is a floor, not a prediction (below)."
        ),
        Table(
            ("workload", "B", "continuous tok/s", "published", "predicted / published", "static at B tok/s",
             "continuous / static", "naive padded floor tok/s", "published naive", "floor / published naive"),
            tuple(_row(p) for p in predictions),
            table_id="gpu-prediction",
        ),
    ]
    naive = [p for p in predictions if p.naive_floor_over_published is not None]
    blocks.append(Paragraph(_naive_note(naive)))
    blocks += [
        Heading("How the predicted continuous schedule ran", 3),
        Table(
            ("workload", "steps", "mean sequences per step", "steps with prefill", "prompt tokens per prefill step",
             "time in prefill steps", "time compute-bound", "preemptions (recompute)"),
            tuple(_schedule_row(p) for p in predictions),
        ),
        Heading("Assumptions", 3),
        Bullets(assumptions(setup, predictions)),
    ]
    if sensitivity:
        blocks += sensitivity_blocks(setup, predictions, sensitivity)
    return blocks


def _row(p: PaperPrediction) -> tuple[str, ...]:
    published = p.settings.published_continuous_tok_s
    ratio = p.continuous_ratio
    floor_ratio = p.naive_floor_over_published
    return (
        p.workload,
        str(p.batch_size),
        num(p.continuous.total_tokens_per_s),
        num(published),
        "—" if ratio is None else f"{times(ratio)} ({pct(ratio - 1, signed=True)})",
        num(p.static.total_tokens_per_s),
        times(p.continuous.total_tokens_per_s / p.static.total_tokens_per_s),
        num(p.naive_floor.total_tokens_per_s),
        num(p.settings.published_naive_tok_s),
        "—" if floor_ratio is None else times(floor_ratio),
    )


def _schedule_row(p: PaperPrediction) -> tuple[str, ...]:
    c = p.continuous
    return (
        p.workload,
        f"{c.num_steps:,}",
        num(c.mean_sequences),
        pct(c.prefill_step_share),
        num(c.mean_prefill_tokens),
        pct(c.prefill_time_share),
        pct(c.compute_bound_time_share),
        f"{c.preemptions} ({c.recomputed_tokens:,} tokens)",
    )


def _naive_note(naive: Sequence[PaperPrediction]) -> str:
    text = (
        "Naive HF static batching is not a vLLM schedule: HF pipelines pad every row of a batch to its longest "
        "member, with their own per-step overhead, which no spec sheet gives. Its column is therefore a floor on "
        "its time: the same padded waves with every step at the card's peak bandwidth and FLOP/s and no "
        "overhead. Nothing is fitted to HF."
    )
    for p in naive:
        text += (
            f" At {p.workload} (B = {p.batch_size}) the floor is {num(p.naive_floor.total_tokens_per_s)} tok/s; the "
            f"published {num(p.settings.published_naive_tok_s)} tok/s is {times(p.naive_floor_over_published or 0)} "
            "slower than that floor."
        )
    return text


def assumptions(setup: GpuSetup, predictions: Sequence[PaperPrediction]) -> tuple[str, ...]:
    """Every constant and rule behind the prediction, each with its source."""
    gpu, model = setup.gpu, setup.model
    kv_tokens = setup.kv_tokens
    budgets = ", ".join(f"{p.workload}: {p.max_num_batched_tokens:,}" for p in predictions)
    width = "B" if setup.max_num_seqs is None else f"{setup.max_num_seqs.value:.0f} ({setup.max_num_seqs.source})"
    return (
        f"Bandwidth {gpu.memory_bandwidth_bytes_per_s / 1e12:.4g} TB/s and peak {gpu.peak_flops / 1e12:.0f} TFLOP/s "
        f"dense: {setup.hardware_source}.",
        f"Efficiency {setup.efficiency.value:g} of peak FLOP/s, one factor for every step: {setup.efficiency.source}.",
        f"Overhead {ms(setup.overhead_s.value)} ms per engine step: {setup.overhead_s.source}.",
        f"KV allowance {setup.kv_cache_bytes.value / 1e9:.2f} GB = {kv_tokens:,} tokens of "
        f"{kv_bytes_per_token(model) // 1024} KiB = {kv_tokens // setup.block_size:,} blocks of {setup.block_size}: "
        f"{setup.kv_cache_bytes.source}.",
        f"Weights {model.num_parameters * model.dtype_bytes / 1e9:.2f} GB read once per step; the KV cache of every "
        "decoding sequence's whole context read once per step; the step takes max(memory time, compute time) "
        "plus the overhead.",
        "FLOPs: 2 per layer weight per token (prefill and decode alike), the LM head once per sequence, attention "
        "4 x layers x heads x head_dim per (query, key) pair (a prompt of n tokens: n(n+1)/2 pairs).",
        f"Engine limits: continuous runs up to {width} sequences, static batches of B; token budget per step "
        f"(max_num_batched_tokens) {budgets}; admission first come first served while the prompt's blocks fit "
        f"above a {setup.watermark:.0%} watermark and the budget holds.",
        "Prefill/decode mix per step: every running sequence decodes one token, and the waiting prompts that fit "
        "are prefilled whole in the same forward pass (no chunking); a prompt's prefill yields its first token.",
        f"Full cache: {setup.preemption}.",
        "Arrivals: every request at t = 0 (a burst); the makespan is the sum of the steps (no client or network "
        "time).",
    )


def sensitivity_blocks(
    setup: GpuSetup, predictions: Sequence[PaperPrediction], rows: Sequence[SensitivityRow]
) -> list[Block]:
    """Continuous throughput with each constant at -20% and +20%, beside the prediction."""
    base = {p.workload: p.continuous.total_tokens_per_s for p in predictions}
    names = [p.workload for p in predictions]
    values = {
        "efficiency": f"{setup.efficiency.value:g}",
        "overhead": f"{ms(setup.overhead_s.value)} ms",
        "bandwidth": f"{setup.gpu.memory_bandwidth_bytes_per_s / 1e12:.4g} TB/s",
        "flops": f"{setup.gpu.peak_flops / 1e12:.0f} TFLOP/s",
        "kv_cache": f"{setup.kv_cache_bytes.value / 1e9:.2f} GB",
    }
    table_rows = []
    for row in rows:
        for label, side in ((f"-{SENSITIVITY_STEP:.0%}", row.low), (f"+{SENSITIVITY_STEP:.0%}", row.high)):
            cells = [f"{num(side[w])} ({pct(side[w] / base[w] - 1, signed=True)})" for w in names]
            table_rows.append((f"{row.constant} {label} (of {values[row.constant]})", *cells))
    return [
        Heading(f"Sensitivity: continuous tok/s with one constant at ±{SENSITIVITY_STEP:.0%}", 3),
        Table(("constant", *names), (("as sourced", *(num(base[w]) for w in names)), *table_rows)),
    ]
