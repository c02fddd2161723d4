"""Workload spec loading: valid files, builtin names, and one-line errors for bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

import harness.workload as api
from harness.errors import UsageError
from harness.workload import (
    ClosedLoopArrival,
    ExponentialLength,
    FileLength,
    PoissonArrival,
    load_spec,
    load_specs,
)

VALID = """\
name: demo
description: a demo
seed: 3
num_requests: 10
endpoint: chat
slo: {ttft_ms: 500, tpot_ms: 50}
prompt_tokens: {kind: fixed, value: 64}
output_tokens: {kind: exponential, mean: 128, cap: 512}
arrival: {kind: poisson, rate: 4}
"""


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def with_fields(**replace: str) -> str:
    """VALID with top-level lines replaced (value "" drops the line), or added."""
    lines = {line.split(":", 1)[0]: line for line in VALID.splitlines()}
    for key, value in replace.items():
        lines[key] = f"{key}: {value}" if value else ""
    return "\n".join(line for line in lines.values() if line) + "\n"


def test_valid_spec_loads_with_defaults(tmp_path):
    spec = load_spec(write_spec(tmp_path, VALID))
    assert spec.name == "demo" and spec.seed == 3 and spec.endpoint == "chat"
    assert spec.slo.ttft_ms == 500 and spec.slo.e2e_ms is None
    assert spec.output_tokens == ExponentialLength(mean=128, cap=512)
    assert spec.arrival == PoissonArrival(rate=4, burstiness=1.0)
    assert spec.duration_s is None and spec.scaled_from is None


def test_closed_loop_with_duration_loads(tmp_path):
    text = with_fields(num_requests="", duration_s="30", arrival="{kind: closed, users: 4}")
    spec = load_spec(write_spec(tmp_path, text))
    assert spec.duration_s == 30.0 and spec.arrival == ClosedLoopArrival(users=4)


def test_builtin_name_loads():
    assert load_spec("anyscale-cap128").name == "anyscale-cap128"
    assert load_spec("anyscale-cap128.yaml").name == "anyscale-cap128"


def test_a_local_file_wins_over_a_builtin_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_spec(tmp_path, VALID, name="anyscale-cap128.yaml")
    assert load_spec("anyscale-cap128.yaml").name == "demo"


def test_file_distribution_resolves_against_the_spec_directory(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "lens.csv").write_text("tokens\n5\n6\n", encoding="utf-8")
    spec_path = write_spec(
        tmp_path, with_fields(prompt_tokens="{kind: file, path: data/lens.csv}")
    )
    monkeypatch.chdir(tmp_path / "data")  # cwd must not matter
    spec = load_spec(spec_path)
    assert isinstance(spec.prompt_tokens, FileLength)
    assert spec.prompt_tokens.lengths == (5, 6)


def test_load_specs_keeps_order_and_refuses_duplicate_names(tmp_path):
    first = write_spec(tmp_path, VALID, name="a.yaml")
    second = write_spec(tmp_path, with_fields(name="other"), name="b.yaml")
    assert [s.name for s in load_specs([second, first])] == ["other", "demo"]
    with pytest.raises(UsageError, match=r"b\.yaml: name: 'demo' is already used by .*a\.yaml"):
        load_specs([first, write_spec(tmp_path, VALID, name="b.yaml")])


BAD_INPUTS = {
    "malformed yaml": (
        VALID + "arrival: {kind: burst\n",
        r"invalid YAML: line \d+, column \d+",
    ),
    "duplicate key": (VALID + "seed: 4\n", r"invalid YAML: line 10, .*duplicate key 'seed'"),
    "not a mapping": ("- 1\n- 2\n", r"expected a mapping of workload fields \(got list\)"),
    "empty file": ("", r"expected a mapping of workload fields \(got an empty file\)"),
    "unknown top-level key": (VALID + "colour: red\n", r"colour: Extra inputs are not permitted"),
    "unknown nested key": (
        with_fields(prompt_tokens="{kind: fixed, value: 64, mean: 3}"),
        r"prompt_tokens\.mean: Extra inputs are not permitted",
    ),
    "unknown distribution kind": (
        with_fields(output_tokens="{kind: gaussian, mean: 3}"),
        r"output_tokens: Input tag 'gaussian' found using 'kind' does not match",
    ),
    "missing distribution kind": (
        with_fields(output_tokens="{mean: 3}"),
        r"output_tokens: Unable to extract tag using discriminator 'kind'",
    ),
    "zero length": (
        with_fields(prompt_tokens="{kind: fixed, value: 0}"),
        r"prompt_tokens\.value: Input should be greater than 0 \(got 0\)",
    ),
    "negative length": (
        with_fields(output_tokens="{kind: choice, values: [100, -5]}"),
        r"output_tokens\.values\.1: Input should be greater than 0 \(got -5\)",
    ),
    "cap below min": (
        with_fields(output_tokens="{kind: exponential, mean: 128, min: 64, cap: 50}"),
        r"output_tokens\.cap: must be >= min \(got 50 < 64\)",
    ),
    "cap far below mean": (
        with_fields(output_tokens="{kind: exponential, mean: 100000, cap: 50}"),
        r"output_tokens\.cap: the accepted range keeps only 0\.05% of draws",
    ),
    "rate zero": (
        with_fields(arrival="{kind: poisson, rate: 0}"),
        r"arrival\.rate: Input should be greater than 0 \(got 0\)",
    ),
    "rate negative": (
        with_fields(arrival="{kind: poisson, rate: -2}"),
        r"arrival\.rate: Input should be greater than 0 \(got -2\)",
    ),
    "both count and duration": (
        with_fields(duration_s="30"),
        r"num_requests, duration_s: give exactly one \(got both\)",
    ),
    "neither count nor duration": (
        with_fields(num_requests=""),
        r"num_requests, duration_s: give exactly one \(got neither\)",
    ),
    "duration with burst": (
        with_fields(num_requests="", duration_s="30", arrival="{kind: burst}"),
        r"duration_s: needs arrival kind poisson or closed",
    ),
    "scaled_from without scaling": (
        with_fields(scaled_from="anyscale-cap32"),
        r"scaling: required when the other of scaled_from/scaling is given",
    ),
    "bad endpoint": (
        with_fields(endpoint="embeddings"),
        r"endpoint: Input should be 'completions' or 'chat' \(got 'embeddings'\)",
    ),
    "missing required field": (with_fields(seed=""), r"seed: Field required"),
    "bad slo": (with_fields(slo="{ttft_ms: -1}"), r"slo\.ttft_ms: Input should be greater than 0"),
    "bad length file": (
        with_fields(prompt_tokens="{kind: file, path: absent.csv}"),
        r"prompt_tokens: cannot read .*absent\.csv",
    ),
}


@pytest.mark.parametrize(("text", "pattern"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_usage_error_line_naming_file_and_field(tmp_path, text, pattern):
    path = write_spec(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert caught.match(pattern)
    assert caught.value.exit_code == 2


def test_several_errors_share_the_line(tmp_path):
    text = with_fields(seed="-1", arrival="{kind: closed, users: 0}")
    with pytest.raises(UsageError) as caught:
        load_spec(write_spec(tmp_path, text))
    assert caught.match(r"seed: .*; arrival\.users: ")


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(UsageError, match=r"absent\.yaml: no such file"):
        load_spec(tmp_path / "absent.yaml")
    unknown = r"no-such-workload: no such file, and no builtin .*anyscale-cap128"
    with pytest.raises(UsageError, match=unknown):
        load_spec("no-such-workload")


def test_directory_is_not_a_spec(tmp_path):
    with pytest.raises(UsageError, match="not a file"):
        load_spec(tmp_path)


def test_every_field_is_described():
    models = [
        obj for obj in vars(api).values() if isinstance(obj, type) and issubclass(obj, BaseModel)
    ]
    assert len(models) >= 12
    undocumented = [
        f"{model.__name__}.{name}"
        for model in models
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert undocumented == []
    assert "output_tokens" in api.WorkloadSpec.model_json_schema()["properties"]
