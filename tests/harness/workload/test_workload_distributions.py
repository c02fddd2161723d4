"""Length distributions: determinism, bounds, rejection (not clipping), file sources."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from harness.workload import (
    ChoiceLength,
    ExponentialLength,
    FileLength,
    FixedLength,
    LengthDistribution,
    NormalLength,
    UniformLength,
)

RANDOM_KINDS = [
    UniformLength(mean=128, spread=0.5),
    ExponentialLength(mean=128, cap=512),
    NormalLength(mean=100, std=30, min=10, max=200),
    ChoiceLength(values=(100, 200, 300, 1000)),
]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("dist", RANDOM_KINDS, ids=lambda d: d.kind)
def test_same_seed_same_lengths_other_seed_other_lengths(dist):
    first = dist.sample(rng(7), 500)
    assert first.dtype == np.int64
    assert (first >= 1).all()
    np.testing.assert_array_equal(first, dist.sample(rng(7), 500))
    assert not np.array_equal(first, dist.sample(rng(8), 500))


def test_fixed_repeats_value():
    np.testing.assert_array_equal(FixedLength(value=64).sample(rng(), 3), [64, 64, 64])


def test_uniform_covers_its_inclusive_bounds():
    dist = UniformLength(mean=128, spread=0.5)
    lengths = dist.sample(rng(), 20_000)
    assert (dist.low, dist.high) == (64, 192)
    assert lengths.min() == 64 and lengths.max() == 192


def capped_exponential_mean(mean: float, low: int, cap: int) -> float:
    """Exact mean of round(Exponential(mean)) conditioned on [low, cap]."""
    ks = np.arange(low, cap + 1)
    weights = np.exp(-(ks - 0.5) / mean) - np.exp(-(ks + 0.5) / mean)
    return float((ks * weights).sum() / weights.sum())


def test_exponential_cap_redraws_instead_of_clipping():
    lengths = ExponentialLength(mean=128, cap=32).sample(rng(), 20_000)
    assert lengths.max() == 32 and lengths.min() >= 1
    # Clipping would put P(X > 32) ~ 78% of the mass on 32; re-drawing leaves ~3%.
    assert (lengths == 32).mean() < 0.05
    expected = capped_exponential_mean(128, 1, 32)
    standard_error = lengths.std() / math.sqrt(lengths.size)
    assert abs(lengths.mean() - expected) < 4 * standard_error
    # The continuous truncated exponential on [0, 32] agrees up to rounding.
    continuous = 128 - 32 * math.exp(-32 / 128) / (1 - math.exp(-32 / 128))
    assert abs(lengths.mean() - continuous) < 1.0


def test_exponential_honours_min():
    lengths = ExponentialLength(mean=10, min=5, cap=40).sample(rng(), 5_000)
    assert lengths.min() == 5 and lengths.max() == 40


def test_normal_redraws_into_its_window():
    lengths = NormalLength(mean=100, std=50, min=80, max=120).sample(rng(), 5_000)
    assert lengths.min() == 80 and lengths.max() == 120
    # Clipping would pile about 35% of draws on each bound.
    assert (lengths == 80).mean() < 0.05


def test_choice_weights_are_normalised():
    dist = ChoiceLength(values=(10, 20), weights=(3, 1))
    lengths = dist.sample(rng(), 40_000)
    assert set(np.unique(lengths)) == {10, 20}
    assert (lengths == 10).mean() == pytest.approx(0.75, abs=0.01)


def test_choice_cycle_emits_values_in_order_without_randomness():
    dist = ChoiceLength(values=(100, 200, 300, 1000), order="cycle")
    np.testing.assert_array_equal(dist.sample(rng(1), 6), [100, 200, 300, 1000, 100, 200])
    np.testing.assert_array_equal(dist.sample(rng(1), 6), dist.sample(rng(2), 6))


def test_zero_draws_give_empty_arrays():
    for dist in [*RANDOM_KINDS, FixedLength(value=3)]:
        assert dist.sample(rng(), 0).shape == (0,)


def test_union_picks_the_model_by_kind():
    adapter = TypeAdapter(LengthDistribution)
    dist = adapter.validate_python({"kind": "exponential", "mean": 128, "cap": 32})
    assert isinstance(dist, ExponentialLength) and dist.min == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "fixed", "value": 0}, "value"),
        ({"kind": "uniform", "mean": 1, "spread": 0.9}, "spread"),
        ({"kind": "exponential", "mean": 10, "min": 20, "cap": 15}, "cap"),
        ({"kind": "exponential", "mean": 10_000, "cap": 5}, "cap"),
        ({"kind": "normal", "mean": 100, "std": 1, "min": 500, "max": 600}, "max"),
        ({"kind": "choice", "values": [1, 2], "weights": [1]}, "weights"),
        ({"kind": "choice", "values": [1, 2], "weights": [1, 0]}, "weights"),
        ({"kind": "choice", "values": [1, 2], "order": "cycle", "weights": [1, 1]}, "weights"),
        ({"kind": "choice", "values": [1, -2]}, "values"),
    ],
)
def test_invalid_parameters_are_rejected_at_the_field(fields, field):
    with pytest.raises(ValidationError) as caught:
        TypeAdapter(LengthDistribution).validate_python(fields)
    assert caught.value.errors()[0]["loc"][1] == field


# File sources.


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text", "column", "expected"),
    [
        ("named.csv", "id,tokens\na,5\nb,7\n", None, (5, 7)),
        ("first.csv", "length,other\n5,x\n7,y\n", None, (5, 7)),
        ("chosen.csv", "a,b\n1,5\n2,7\n", "b", (5, 7)),
        ("bare.csv", "5\n7\n", None, (5, 7)),
        ("rows.jsonl", '{"tokens": 5}\n\n{"tokens": 7, "x": 1}\n', None, (5, 7)),
        ("keyed.jsonl", '{"n": 5}\n{"n": 7}\n', "n", (5, 7)),
    ],
)
def test_file_lengths_are_read(tmp_path, name, text, column, expected):
    dist = FileLength(path=write(tmp_path / name, text), column=column)
    assert dist.lengths == expected


def test_file_sampling_draws_from_the_file_and_cycles_in_order(tmp_path):
    path = write(tmp_path / "lens.csv", "tokens\n5\n7\n11\n")
    sampled = FileLength(path=path).sample(rng(), 1_000)
    assert set(np.unique(sampled)) == {5, 7, 11}
    cycled = FileLength(path=path, order="cycle").sample(rng(), 5)
    np.testing.assert_array_equal(cycled, [5, 7, 11, 5, 7])


def test_file_relative_path_resolves_against_base_dir(tmp_path):
    write(tmp_path / "lens.jsonl", '{"tokens": 9}\n')
    dist = FileLength.model_validate(
        {"kind": "file", "path": "lens.jsonl"}, context={"base_dir": tmp_path}
    )
    assert dist.path == tmp_path / "lens.jsonl"
    assert dist.lengths == (9,)


@pytest.mark.parametrize(
    ("name", "text", "column", "complaint"),
    [
        ("zero.csv", "tokens\n5\n0\n", None, "line 3: '0' is not a positive integer"),
        ("word.csv", "tokens\n5\nmany\n", None, "line 3: 'many' is not a positive integer"),
        ("nocol.csv", "a,b\n1,2\n", "tokens", "no column 'tokens'"),
        ("empty.csv", "", None, "holds no lengths"),
        ("float.jsonl", '{"tokens": 5.5}\n', None, "line 1: 5.5 is not a positive integer"),
        ("nokey.jsonl", '{"n": 5}\n', None, "line 1: no key 'tokens'"),
        ("broken.jsonl", "{\n", None, "line 1: not JSON"),
    ],
)
def test_bad_files_are_rejected(tmp_path, name, text, column, complaint):
    with pytest.raises(ValidationError, match=complaint):
        FileLength(path=write(tmp_path / name, text), column=column)


def test_missing_file_is_rejected(tmp_path):
    with pytest.raises(ValidationError, match="cannot read"):
        FileLength(path=tmp_path / "absent.csv")


def test_weights_near_the_float_limit_still_plan():
    # Their sum overflows to inf; scaled by the largest first, they are two equal weights.
    choice = ChoiceLength(values=(1, 2), weights=(1e308, 1e308))
    drawn = choice.sample(np.random.default_rng(0), 1000)
    assert set(drawn) == {1, 2} and 400 < (drawn == 1).sum() < 600
