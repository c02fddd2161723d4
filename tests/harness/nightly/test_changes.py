"""Change points over nights: a lasting step is found where it happened, noise and one bad night are not."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from harness.errors import UsageError
from harness.nightly.changes import MIN_NIGHTS, change_points, require_otava


def noisy(level: float, nights: int, seed: int, noise: float = 0.03) -> list[float]:
    return list(level * (1 + noise * np.random.default_rng(seed).standard_normal(nights)))


def test_a_lasting_ten_percent_drop_is_found_at_its_night():
    (point,) = change_points(noisy(1000.0, 20, 1) + noisy(900.0, 15, 2))
    assert point.index == 20 and point.change == pytest.approx(-0.10, abs=0.02) and point.pvalue < 0.001


@pytest.mark.parametrize("seed", range(5))
def test_noise_alone_has_no_change_point(seed):
    assert change_points(noisy(1000.0, 40, seed)) == []


def test_one_bad_night_is_not_a_change():
    values = noisy(1000.0, 30, 3)
    values[15] *= 0.85
    assert change_points(values) == []


def test_too_short_a_history_has_none_and_bad_values_are_refused():
    assert change_points([1000.0, 500.0] * (MIN_NIGHTS // 2 - 1)) == []
    with pytest.raises(ValueError, match="finite"):
        change_points([1.0, float("nan")] * MIN_NIGHTS)


def test_without_otava_the_night_names_the_command_that_installs_it(monkeypatch):
    require_otava()  # installed here, from the lock
    # A None entry in sys.modules makes the import fail, as on a machine without Otava.
    monkeypatch.setitem(sys.modules, "otava", None)
    monkeypatch.setitem(sys.modules, "otava.analysis", None)
    with pytest.raises(UsageError, match=r"pip install --no-deps apache-otava==0\.8\.0"):
        require_otava()
    with pytest.raises(UsageError, match="Apache Otava"):
        change_points([1.0] * MIN_NIGHTS)
