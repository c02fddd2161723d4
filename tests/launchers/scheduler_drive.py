"""vLLM's real scheduler classes driven in the engine core's call orders, without a model.

As vLLM's own scheduler unit tests do: a real `VllmConfig` for the tiny model, real
`Request` objects, and fabricated `ModelRunnerOutput`s (one sampled token for every
request whose prompt is fully computed). The loop follows `vllm/v1/engine/core.py`:
- depth 1 is `EngineCore.step`: schedule(), then its own update_from_output();
- depth d > 1 is `step_with_batch_queue` (async scheduling: 2; pipeline parallelism: its
  size): schedule() while the queue has room and there is work, and update the oldest
  output only when the queue is full or nothing more can be scheduled.
Aborts arrive as the engine core takes them: between steps in the synchronous loop
(before the next schedule()), and just before an update in the batch-queue loop.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from vllm import triton_utils
from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from vllm.sampling_params import SamplingParams
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

from launchers.models import TINY

BLOCK_SIZE = 16
SAMPLED_TOKEN = 100


def vllm_config(model_dir: Path, max_num_seqs: int, num_blocks: int, max_num_batched_tokens: int) -> VllmConfig:
    """A real engine configuration for the tiny model, with a KV cache of `num_blocks` blocks."""
    # The x86 CPU platform wants triton-cpu, which only its model runner uses, and no model runs
    # here: 0.34 refuses the configuration without it (0.30-0.33 warn).
    triton_utils.HAS_TRITON = True
    max_model_len = TINY.config["max_position_embeddings"]
    config = VllmConfig(
        model_config=ModelConfig(model=str(model_dir), dtype="float32", max_model_len=max_model_len,
                                 skip_tokenizer_init=True),
        scheduler_config=SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                         max_model_len=max_model_len, is_encoder_decoder=False),
        # No prefix cache, as our launcher starts vLLM: every prompt is computed.
        cache_config=CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=False),
    )
    config.cache_config.num_gpu_blocks = num_blocks
    return config


def kv_cache_config(num_blocks: int) -> KVCacheConfig:
    """One full-attention group shaped like the tiny model's layers."""
    heads = TINY.config["num_key_value_heads"]
    head_size = TINY.config["hidden_size"] // TINY.config["num_attention_heads"]
    spec = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=heads, head_size=head_size, dtype=torch.float32)
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])


@dataclass
class DrivenEngine:
    """A scheduler class instance run in the engine core's loop for a given batch-queue depth."""

    scheduler_cls: type
    config: VllmConfig
    depth: int
    step_log: Path
    # abort_before_update[k]: request ids aborted before the (k+1)-th update_from_output.
    abort_before_update: dict[int, list[str]] = field(default_factory=dict)
    scheduled_steps: int = 0
    updates: int = 0
    # Each executed step as worked out here request by request, to hold the step log against.
    truth: list[dict[str, Any]] = field(default_factory=list)
    _next_token: int = 10
    _requests: dict[str, Request] = field(default_factory=dict)
    _finished: set[str] = field(default_factory=set)
    _running_before: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        num_blocks = self.config.cache_config.num_gpu_blocks
        assert num_blocks is not None
        self.scheduler: Any = self.scheduler_cls(
            vllm_config=self.config,
            kv_cache_config=kv_cache_config(num_blocks),
            structured_output_manager=StructuredOutputManager(self.config),
            block_size=BLOCK_SIZE,
        )

    def add(self, request_id: str, prompt_tokens: int, output_tokens: int) -> None:
        """One request of exact lengths (EOS ignored), arriving now."""
        params = SamplingParams(max_tokens=output_tokens, ignore_eos=True)
        prompt = [self._next_token + i for i in range(prompt_tokens)]
        self._next_token += prompt_tokens
        request = Request(request_id, prompt, params, None, arrival_time=time.time())
        self._requests[request_id] = request
        self.scheduler.add_request(request)

    def run(self, max_iterations: int = 10_000) -> list[dict[str, Any]]:
        """Drive the scheduler until it has no work; return the step log's rows."""
        queue: deque[tuple[Any, list[str], dict[str, Any] | None]] = deque()
        for _ in range(max_iterations):
            if self.depth == 1:
                self._abort_due()
            if self.scheduler.has_requests():
                self._running_before = {rid for rid, r in self._requests.items() if r.status == RequestStatus.RUNNING}
                output = self.scheduler.schedule()
                executed = output.total_num_scheduled_tokens > 0
                self.scheduled_steps += executed
                queue.appendleft((output, self._sampling(output), self._step_truth(output) if executed else None))
                if len(queue) < self.depth and (executed or self.scheduler.has_requests()):
                    continue
            elif not queue:
                return self.rows()
            output, sampling, truth = queue.pop()
            if self.depth > 1:
                self._abort_due()
            outputs_before = {rid: self._requests[rid].num_output_tokens for rid in output.num_scheduled_tokens}
            self.scheduler.update_from_output(output, _model_output(output, sampling))
            self.updates += 1
            if truth is not None:
                self._close_truth(truth, outputs_before)
        raise AssertionError(f"scheduler still busy after {max_iterations} iterations")

    def rows(self) -> list[dict[str, Any]]:
        """The step log as written so far (the recorder flushes when the engine goes idle)."""
        if not self.step_log.exists():
            return []
        return [json.loads(line) for line in self.step_log.read_text().splitlines()]

    def _step_truth(self, output: Any) -> dict[str, Any]:
        """The step's shape from each scheduled request's own counts, right after scheduling."""
        scheduled = output.num_scheduled_tokens
        # Waiting: every request added and neither running nor finished, whichever queue of vLLM's holds it.
        waiting = sum(1 for r in self._requests.values() if r.status != RequestStatus.RUNNING and not r.is_finished())
        row = Counter[str](running=len(scheduled), waiting=waiting)
        for rid, tokens in scheduled.items():
            request = self._requests[rid]
            computed_before = request.num_computed_tokens - tokens
            prompt_part = max(0, min(tokens, request.num_prompt_tokens - computed_before))
            row["prefill"] += prompt_part
            # Causal attention: the i-th new prompt token attends over computed_before + i keys.
            row["prefill_pairs"] += sum(computed_before + i for i in range(1, prompt_part + 1))
            row["decode"] += tokens - prompt_part
            row["context"] += request.num_computed_tokens
        truth: dict[str, Any] = dict(row)
        # Admitted: it was not running when this schedule() began (new, or resumed after preemption).
        truth["admitted"] = sorted(set(scheduled) - self._running_before)
        return truth

    def _close_truth(self, truth: dict[str, Any], outputs_before: dict[str, int]) -> None:
        """Tokens the step delivered, and who left the engine since the previous step closed."""
        truth["generated"] = sum(self._requests[rid].num_output_tokens - n for rid, n in outputs_before.items())
        finished = {rid for rid, request in self._requests.items() if request.is_finished()}
        truth["finished"] = sorted(finished - self._finished)
        self._finished = finished
        self.truth.append(truth)

    def _sampling(self, output: Any) -> list[str]:
        """Requests the model samples for in this step: those whose known tokens are all computed."""
        requests = self.scheduler.requests
        return [rid for rid in output.num_scheduled_tokens if not requests[rid].is_prefill_chunk]

    def _abort_due(self) -> None:
        for request_id in self.abort_before_update.pop(self.updates, []):
            self.scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)


def _model_output(output: Any, sampling: list[str]) -> ModelRunnerOutput:
    ids = list(output.num_scheduled_tokens)
    sampled = set(sampling)
    fields: dict[str, Any] = {"req_ids": ids,
                              "sampled_token_ids": [[SAMPLED_TOKEN] if rid in sampled else [] for rid in ids]}
    # Releases before 0.34 also take each request's row index.
    if "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}:
        fields["req_id_to_index"] = {rid: index for index, rid in enumerate(ids)}
    return ModelRunnerOutput(**fields)
