"""The latency curves on paper: OPT-13B on an A100, Anyscale's latency workload, a few rates."""

from __future__ import annotations

import math

import pytest

from harness.paper.gpu_setups import ANYSCALE_OPT_13B_A100
from harness.rate_sweep.curve import SloSeconds
from harness.rate_sweep.on_paper import curve_blocks, predict_curves
from harness.report.document import to_markdown
from harness.workload.spec import load_specs

SLO = SloSeconds(ttft_p50_s=1.0, e2e_p99_s=30.0)


@pytest.fixture(scope="module")
def curves():
    spec = load_specs(["anyscale-latency"])[0]
    return predict_curves(ANYSCALE_OPT_13B_A100, spec, [0.5, 2.0, 8.0], SLO)


def test_continuous_keeps_up_below_its_saturation_and_static_at_b4_does_not(curves):
    continuous, static = curves.system("continuous"), curves.system("static")
    assert curves.batch_size == 4  # the published static B for outputs capped at 1,536
    # Continuous is bounded by the KV cache (~38 sequences of ~400 tokens): 5-8 requests/s on paper.
    assert 5 < continuous.saturation_rps < 8
    assert 0.3 < static.saturation_rps < 0.7
    by_rate = {(p.system, p.offered_rate): p for result in curves.systems for p in result.points}
    assert by_rate["continuous", 2.0].keeps_up and not by_rate["continuous", 8.0].keeps_up
    assert not by_rate["static", 2.0].keeps_up
    assert by_rate["static", 2.0].queue_wait_p50_s > 5 * by_rate["continuous", 2.0].queue_wait_p50_s
    # Every measured request finished, after the warm-up: the simulation lost none.
    assert all(p.measured > 150 and math.isfinite(p.e2e_p99_s) for p in by_rate.values())


def test_held_rates_and_their_ratio_are_read_as_the_sweep_reads_them(curves):
    continuous, static = curves.system("continuous"), curves.system("static")
    assert continuous.held.bound == "interpolated" and 2.0 <= continuous.held.rate < 8.0
    assert static.held.bound == "below the grid"
    text = curves.held_ratio_text()
    assert text.startswith("more than ") and "0.5 requests/s" in text
    markdown = to_markdown(curve_blocks(curves))
    assert "anyscale-latency on opt-13b/a100-40gb, on paper" in markdown
    assert "impatient" in markdown and "token budget 8100" in markdown


def test_a_burst_has_no_latency_curve():
    with pytest.raises(ValueError, match="not a burst"):
        predict_curves(ANYSCALE_OPT_13B_A100, load_specs(["anyscale-cap32"])[0], [1.0], SLO)
