"""The GPU prediction in the report: chosen by the served model profile, every assumption stated."""

from __future__ import annotations

import pytest

from harness.paper.gpu_setups import ANYSCALE_OPT_13B_A100
from harness.report.document import to_markdown
from harness.report.facts import paper_predictions
from harness.report.prediction import prediction_blocks
from harness.rundir.manifest import HostInfo, RunCounts, RunManifest
from harness.workload.spec import load_spec

HOST = HostInfo(hostname="gpu-1", cpu="Test CPU", cores=8, memory_gib=64.0, python="3.12", platform="Linux")


def manifest(model: str, workload: str, system: str = "continuous") -> RunManifest:
    return RunManifest(
        run_id=f"{system}-{workload}", system=system, workload=load_spec(workload).model_dump(mode="json"),
        plan_sha256="0" * 64, batch_size=16, endpoint="http://127.0.0.1:8000", model=model, server=None,
        harness_version="0.1.0", git_sha=None, locust_version="2.47.0", host=HOST, telemetry_interval_s=0.25,
        started_at=0.0, counts=RunCounts(planned=1000, sent=1000, ok=1000), complete=True,
    )


def test_runs_of_a_gpu_profile_get_that_setups_predictions_per_burst_workload():
    manifests = [manifest("opt-13b", "anyscale-cap32", s) for s in ("continuous", "static", "naive")]
    manifests += [manifest("opt-13b", "anyscale-cap1536"), manifest("opt-13b", "cpu-poisson")]
    predictions = paper_predictions(manifests)
    assert all(p.setup is ANYSCALE_OPT_13B_A100 for p in predictions)
    assert [p.workload for p in predictions] == ["anyscale-cap32", "anyscale-cap1536"]


def test_runs_of_a_cpu_model_get_none():
    assert paper_predictions([manifest("tiny", "anyscale-cap32"), manifest("my-org/model", "anyscale-cap32")]) == ()


def test_the_report_blocks_state_every_assumption():
    text = to_markdown(prediction_blocks(paper_predictions([manifest("opt-13b", "anyscale-cap128")])))
    assert "| anyscale-cap128 | 12 | 3,967 | 3,592 | 1.10x (+10.4%) |" in text
    for stated in ("Bandwidth 1.555 TB/s", "peak 312 TFLOP/s", "Efficiency 0.52", "Megatron-LM",
                   "Overhead 14.0 ms", "time.sleep(0.01)", "KV allowance 12.88 GB = 15,728 tokens", "SOSP'23",
                   "anyscale-cap128: 7,500", "Prefill/decode mix per step", "recompute", "a burst"):
        assert stated in text, stated


def test_the_report_blocks_need_predictions_of_one_setup():
    with pytest.raises(ValueError, match="predictions"):
        prediction_blocks([])
