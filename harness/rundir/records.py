"""The tables a run writes, documented in one place.

Every timestamp is epoch seconds from `time.time()` on the client machine that took
it; telemetry uses the same clock, so the tables line up.

- `records.parquet`: one row per request (RECORD_SCHEMA).
- `tokens.parquet`: one row per generated token (TOKEN_SCHEMA). A streamed chunk that
  carries k tokens (the server coalesced them) gives k rows with the same time, so
  per-token inter-token latency is honest about coalescing.
- `telemetry.parquet`: one row per poll of the server's /metrics (TELEMETRY_SCHEMA).
- `steps.parquet`: one row per engine step during the run (STEP_SCHEMA), recorded
  inside vLLM by launchers.engine.step_recorder; only for servers the harness launched.
  Its times are the engine process's `time.time()`: the same clock on one machine.
- `gpu.parquet`: one row per GPU per NVML sample during the run (GPU_SCHEMA), taken by
  harness.telemetry.gpu; only when the server runs on a machine with an NVIDIA GPU and
  its driver (the manifest's `gpu_telemetry` says why there is none otherwise).
"""

from __future__ import annotations

import pyarrow as pa

RECORDS_FILE = "records.parquet"
TOKENS_FILE = "tokens.parquet"
TELEMETRY_FILE = "telemetry.parquet"
STEPS_FILE = "steps.parquet"
GPU_FILE = "gpu.parquet"
MANIFEST_FILE = "manifest.json"
PLAN_FILE = "plan.json"

RECORD_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "request_id": (pa.int64(), "index of the request in the plan"),
    "worker": (pa.string(), "which load worker sent it (host:pid)"),
    "planned_prompt_tokens": (pa.int64(), "prompt length the plan asked for"),
    "planned_output_tokens": (pa.int64(), "output length the plan asked for (the useful tokens)"),
    "requested_output_tokens": (
        pa.int64(), "max_tokens = min_tokens sent; above planned only for padded (naive) waves"
    ),
    "wave": (pa.int64(), "the wave it was sent in (naive, client-static), from 0; -1 when not sent in waves"),
    "trace_row": (pa.int64(), "a trace's request: its row in the trace file, 0-based among its data rows; -1 if none"),
    "session": (pa.string(), "a trace's session or conversation id; empty when it has none"),
    "hash_ids": (pa.string(), "a trace's prefix hash ids, as a JSON list; empty when it has none"),
    "label": (pa.string(), "a trace's class label; empty when it has none"),
    "turn": (pa.int64(), "a conversation's turn number in its session; -1 when not a conversation"),
    "after": (
        pa.int64(), "a conversation's later turn: the request_id of its previous turn, whose answer it waited for;"
        " -1 for a first turn or not a conversation"
    ),
    "think_s": (
        pa.float64(), "a conversation's later turn: seconds after its previous turn's end_s at which it was due"
        " (scheduled_s = that end_s + think_s); 0 for a first turn or not a conversation"
    ),
    "scheduled_s": (pa.float64(), "when the plan wanted it sent; NaN in a closed loop"),
    "sent_s": (pa.float64(), "when it was actually sent"),
    "lateness_s": (pa.float64(), "sent_s - scheduled_s: how far the client fell behind; NaN in a closed loop"),
    "first_token_s": (pa.float64(), "arrival of the first generated token; NaN if none came"),
    "end_s": (pa.float64(), "end of the response (or of the failure)"),
    "prompt_tokens": (pa.int64(), "prompt tokens the server counted (usage); -1 if unknown"),
    "completion_tokens": (
        pa.int64(),
        "generated tokens that arrived, counted from the stream (token ids; else the running usage)",
    ),
    "usage_completion_tokens": (pa.int64(), "generated tokens the server's final usage claimed; -1 if none"),
    "status": (pa.int64(), "HTTP status; 0 when no response arrived (connection error, timeout, never sent)"),
    "error_kind": (pa.string(), "why it failed, one of harness.driver.outcome.FAILURE_KINDS; empty when ok"),
    "error": (pa.string(), "why it failed, one line; empty when ok"),
    "ok": (
        pa.bool_(),
        "HTTP 200, a well-formed stream ending in [DONE], no error event, the tokens asked for, usage agreeing",
    ),
    "length_mismatch": (pa.bool_(), "completion_tokens differs from requested_output_tokens"),
    "length_forced": (
        pa.bool_(),
        "the request forced its length through options the server honours (harness.driver.backends); false"
        " for a generic OpenAI server, where requested_output_tokens is only a cap",
    ),
    "retokenized_completion_tokens": (
        pa.int64(),
        "the streamed text's tokens by the run's tokenizer, the cross-check where no token ids arrive; -1 if"
        " not counted",
    ),
    "length_exact": (
        pa.bool_(),
        "ok, the length forced, and every count agreeing with requested_output_tokens (token ids; else usage"
        " and the re-tokenised text)",
    ),
}

TOKEN_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "request_id": (pa.int64(), "index of the request in the plan"),
    "token_index": (pa.int64(), "0 for the first generated token"),
    "t_s": (pa.float64(), "arrival time of the chunk that carried this token"),
}

STEP_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "t_s": (pa.float64(), "when the engine began scheduling the step (before the previous one ended, under async)"),
    "end_s": (pa.float64(), "when the step's model output reached the scheduler"),
    "running": (pa.int64(), "requests in the step (this run's and any other's)"),
    "waiting": (pa.int64(), "requests waiting in the engine after scheduling"),
    "prefill_tokens": (pa.int64(), "prompt tokens computed in the step"),
    "decode_tokens": (pa.int64(), "tokens scheduled beyond the prompts (one per decoding request)"),
    "context_tokens": (pa.int64(), "sum over the step's requests of the tokens they attend to"),
    "prefill_pairs": (pa.float64(), "(query, key) pairs the step's prompt tokens attend over: c*p + c*(c+1)/2 per"
                      " chunk of c prompt tokens after p computed ones; NaN in runs recorded before it"),
    "generated_tokens": (
        pa.int64(), "output tokens the step sampled and kept (not those of a request that had already ended)"
    ),
    "admitted": (pa.list_(pa.int64()), "request_ids of this run first scheduled (or resumed) in the step"),
    "finished": (pa.list_(pa.int64()), "request_ids of this run that finished in the step"),
}

TELEMETRY_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "t": (pa.float64(), "time of the poll"),
    "running": (pa.float64(), "vllm:num_requests_running"),
    "waiting": (pa.float64(), "vllm:num_requests_waiting"),
    "kv_cache_usage": (pa.float64(), "vllm:kv_cache_usage_perc (0..1)"),
    "generation_tokens_total": (pa.float64(), "vllm:generation_tokens_total"),
    "prompt_tokens_total": (pa.float64(), "vllm:prompt_tokens_total"),
    "preemptions_total": (pa.float64(), "vllm:num_preemptions_total"),
    "prefix_cache_queries_total": (pa.float64(), "vllm:prefix_cache_queries_total (prompt tokens looked up)"),
    "prefix_cache_hits_total": (pa.float64(), "vllm:prefix_cache_hits_total (of those, found cached)"),
    "latency_s": (pa.float64(), "how long /metrics took to answer"),
}

GPU_FIELDS: dict[str, tuple[pa.DataType, str]] = {
    "t": (pa.float64(), "time of the sample"),
    "gpu": (pa.int64(), "NVML device index"),
    "utilization": (
        pa.float64(), "share of NVML's last sample period (1/6 to 1 s) a kernel ran (0..1); NaN if unread"
    ),
    "memory_used_bytes": (pa.float64(), "device memory in use, every process's; NaN if unread"),
    "memory_total_bytes": (pa.float64(), "device memory installed; NaN if unread"),
    "power_w": (pa.float64(), "board power draw (nvmlDeviceGetPowerUsage); NaN if unread or unsupported"),
    "energy_j": (
        pa.float64(),
        "energy since the driver loaded (nvmlDeviceGetTotalEnergyConsumption, Volta and later); NaN if unsupported",
    ),
    "latency_s": (pa.float64(), "how long reading this GPU took"),
    "error": (pa.string(), "the NVML errors of this sample, `reading: message; ...`; empty when all were read"),
}


def _schema(fields: dict[str, tuple[pa.DataType, str]]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype, metadata={"description": doc}) for name, (dtype, doc) in fields.items()])


RECORD_SCHEMA = _schema(RECORD_FIELDS)
TOKEN_SCHEMA = _schema(TOKEN_FIELDS)
TELEMETRY_SCHEMA = _schema(TELEMETRY_FIELDS)
STEP_SCHEMA = _schema(STEP_FIELDS)
GPU_SCHEMA = _schema(GPU_FIELDS)
