"""Published figures beside ours: Anyscale's 2023 post and the seed's back-of-envelope
numbers, the same quantities computed here (physics, simulate) and measured here.
Also the model cards those computed numbers come from."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from harness.analysis.levels import is_cap
from harness.report.causes import cause_sentences, cause_table
from harness.report.document import Block, Heading, Paragraph, Table
from harness.report.facts import QUOTED_BATCHES, SEED_OUTPUTS, ReportFacts, ReportRun, unique
from harness.report.format import ms, num
from harness.report.setup import measured_runs, plan_lines

# Measured ratios here are the headline's, which the gap table carries.
AS_HEADLINE = " (as in the headline)"
NOT_FASTER_TRANSFORMER = ("not comparable: static here is vLLM's own engine admitting only into an empty batch, not"
                          " FasterTransformer's kernels (docs/methodology.md)")


def published_section(facts: ReportFacts) -> list[Block]:
    """The published-figures table and what differs between their setup and ours."""
    runs, table = facts.runs, facts.gap_table
    llama = facts.cards[0]
    caps = table.loc[[is_cap(level) for level in table["level"]]]
    rows = (
        ("Setup",
         "Anyscale: OPT-13B on one A100 40GB; 1000 prompts of 512 tokens; outputs exponential, mean 128, "
         "capped at 32/128/512/1536; all sent at once",
         "—", _our_setup(runs)),
        ("Naive static batch size per cap", "16/12/8/4 (HF pipelines) for caps 32/128/512/1536", "—",
         _batch_sizes(runs, "naive")),
        ("vLLM (continuous batching + PagedAttention) over naive", "~23x",
         _per_level(caps, "continuous", "naive", predicted=True),
         _per_level(caps, "continuous", "naive", note=AS_HEADLINE)),
        ("Continuous batching alone over naive", "~8x", "—",
         "not separable here: our continuous system is vLLM itself"),
        ("Optimised static batching (FasterTransformer) over naive", "~4x",
         _per_level(caps, "static", "naive", predicted=True),
         f"{NOT_FASTER_TRANSFORMER}; ours: {_per_level(caps, 'static', 'naive', note=AS_HEADLINE)}"),
        ("Naive static batching at the widest spread", "~81 tok/s", _widest(caps, "naive_predicted_total_tok_s"),
         f"not comparable ({_models_and_hosts(runs)}, not OPT-13B on an A100): ours"
         f" {_widest(caps, 'naive_total_tok_s')}"),
        ("Seed: useful slots, outputs 100/200/300/1000 in one static batch of 4", "40%",
         f"{facts.seed_static.useful_fraction:.0%} (simulated)", _seed_measured(runs)),
        ("Llama-3.1-8B BF16 weights", "~16 GB", f"{llama.weight_bytes / 1e9:.1f} GB", "—"),
        ("Decode step floor, H100 at 3.35 TB/s", "~4.8 ms", f"{llama.decode_step_floor_s * 1e3:.2f} ms",
         _single_sequence_step(facts)),
        ("Batch where compute catches up (H100)", "~300 sequences", f"{llama.crossover_batch:.0f} sequences", "—"),
        ("KV cache per token (Llama-3.1-8B)", "128 KiB", f"{llama.kv_bytes_per_token / 1024:.0f} KiB", "—"),
        ("KV cache room, H100 80GB", "~53 GB", f"{llama.kv_cache_bytes_available / 1e9:.1f} GB", "—"),
    )
    return [
        Heading("Published figures beside ours"),
        Paragraph("Published: Anyscale's 2023 continuous-batching post and the seed's back-of-envelope figures. "
                  "Computed: physics.model_card and simulate. Measured: these runs."),
        Table(("quantity", "published", "computed here", "measured here"), rows, numeric=False),
        Paragraph(_what_differs(facts)),
        *_cause_blocks(facts),
    ]


def _models_and_hosts(runs: Sequence[ReportRun]) -> str:
    models = ", ".join(unique(run.data.manifest.model for run in runs))
    hosts = ", ".join(unique(f"{run.data.manifest.host.cpu} ({run.data.manifest.host.cores} cores)" for run in runs))
    return f"{models} on {hosts}"


def _our_setup(runs: Sequence[ReportRun]) -> str:
    capped = [run for run in runs if is_cap(run.entry.level)]
    if not capped:
        return "no cap-level runs"
    return f"{_models_and_hosts(capped)}; {'; '.join(plan_lines(measured_runs(capped)))}"


def _batch_sizes(runs: Sequence[ReportRun], system: str) -> str:
    sizes = sorted((r.entry.level, r.data.manifest.batch_size) for r in runs
                   if r.entry.system == system and is_cap(r.entry.level))
    return ", ".join(f"cap {level}: B={b}" for level, b in sizes) or "—"


def _per_level(caps: pd.DataFrame, a: str, b: str, predicted: bool = False, note: str = "") -> str:
    """a/b at each cap: the ratio of the predicted totals, or the measured ratio column (the headline's)."""
    if predicted:
        values = [top / bottom if bottom > 0 else math.nan for top, bottom in
                  zip(caps[f"{a}_predicted_total_tok_s"], caps[f"{b}_predicted_total_tok_s"], strict=True)]
    else:
        values = list(caps[f"{a}/{b}"])
    parts = [f"cap {level}: {value:.1f}x" for level, value in zip(caps["level"], values, strict=True)
             if not math.isnan(value)]
    return ", ".join(parts) + note if parts else "—"


def _widest(caps: pd.DataFrame, column: str) -> str:
    known = caps.loc[caps[column].notna()]
    if known.empty:
        return "—"
    last = known.iloc[-1]
    return f"{num(last[column])} tok/s at cap {last['level']}"


def _seed_measured(runs: Sequence[ReportRun]) -> str:
    for run in runs:
        output = run.data.manifest.workload.output_tokens.model_dump()
        if run.entry.system == "static" and set(output.get("values") or ()) == set(SEED_OUTPUTS):
            return (f"{run.entry.metrics.useful_slot_time_fraction:.0%} of slot-time useful "
                    f"({run.data.manifest.run_id}, B={run.data.manifest.batch_size})")
    return "no static seed run"


def _single_sequence_step(facts: ReportFacts) -> str:
    if facts.step_quote is None:
        return "—"
    return (f"{ms(facts.step_quote.one_sequence_s)} ms for one sequence at "
            f"{facts.step_quote.context_per_sequence:,.0f} tokens of context (fitted on our engine steps)")


def _what_differs(facts: ReportFacts) -> str:
    llama = facts.cards[0]
    ours = ""
    quote = facts.step_quote
    if quote is not None:
        low, high = QUOTED_BATCHES
        where = ("the mean over the continuous runs' engine steps" if quote.measured_context
                 else "no engine steps to measure it from")
        ours = (f" Here a decode step of {high} sequences costs {quote.batch_ratio:.1f}x one of {low}"
                f" (fitted step cost, {quote.context_per_sequence:,.0f} tokens of context each: {where}); for"
                f" Llama-3.1-8B on an H100 the roofline gives {facts.gpu_batch_ratio:.2f}x.")
    return (
        "What differs: Anyscale served OPT-13B on an A100 and the seed reasons about Llama-3.1-8B on an H100, "
        f"while these runs use {_models_and_hosts(facts.runs)}. A GPU decode "
        "step of an 8-13B model is memory-bound: it reads every weight once "
        f"(~{llama.decode_step_floor_s * 1e3:.1f} ms for Llama-3.1-8B on an H100) and compute only catches up near "
        f"{llama.crossover_batch:.0f} sequences, so extra sequences are nearly free.{ours} Our continuous "
        "system is vLLM, so Anyscale's ~8x (continuous batching alone) and ~23x (vLLM) cannot be told apart here. "
        "What should carry over: the ordering continuous > static > naive and the growth of the gap with the "
        "spread of output lengths; absolute tok/s and the size of the ratios do not."
    )


def _cause_blocks(facts: ReportFacts) -> list[Block]:
    """The measured gap split by cause at every cap, and in words at the widest."""
    if not facts.gap_causes or facts.step_quote is None:
        return [Paragraph("Why the gap is this size: not split here, since these runs have no engine step logs "
                          "or no step-cost model.")]
    quote_server = facts.step_quote.step_cost.server
    return [
        Paragraph(
            "Why the gap is this size, from these runs' engine steps, every step of both systems priced by one "
            f"step-cost model ({quote_server}; table below). " + cause_sentences(facts.gap_causes[-1])
        ),
        cause_table(facts.gap_causes),
    ]


def model_card_section(facts: ReportFacts) -> list[Block]:
    """Decode physics on paper for the two published setups; none in a report with no run on a GPU."""
    if not any(run.data.manifest.gpu_telemetry and run.data.manifest.gpu_telemetry.devices for run in facts.runs):
        return []
    cards = facts.cards
    rows = (
        ("parameters", *(f"{c.num_parameters / 1e9:.2f} B" for c in cards)),
        ("weights (BF16/FP16)", *(f"{c.weight_bytes / 1e9:.1f} GB" for c in cards)),
        ("KV cache per token", *(f"{c.kv_bytes_per_token / 1024:.0f} KiB" for c in cards)),
        ("decode step floor (weights / bandwidth)", *(f"{c.decode_step_floor_s * 1e3:.2f} ms" for c in cards)),
        ("FLOPs per token", *(f"{c.flops_per_token / 1e9:.1f} GFLOP" for c in cards)),
        ("compute/memory crossover batch", *(f"{c.crossover_batch:.0f}" for c in cards)),
        ("KV cache room (memory x utilisation - weights - activations - non-torch)",
         *(f"{c.kv_cache_bytes_available / 1e9:.1f} GB" for c in cards)),
        ("KV cache capacity", *(f"{c.kv_tokens_capacity:,} tokens" for c in cards)),
    )
    return [
        Heading("Model cards"),
        Paragraph("Decode physics on paper (physics.model_card): decimal GB, spec-sheet bandwidth and dense BF16 "
                  "FLOP/s, vLLM's default 90% memory utilisation."),
        Table(("", *(f"{c.model} on {c.gpu}" for c in cards)), rows),
    ]
