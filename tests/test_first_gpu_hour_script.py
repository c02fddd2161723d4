"""examples/first-gpu-hour.sh with a stand-in `batchbench`: both commands run, in order, whatever the first
exits, and the archive holds what the first GPU owner sends back (no server: the stand-in writes the files)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "first-gpu-hour.sh"

# Writes what each command writes under --out, logs its arguments, exits as told.
STAND_IN = """#!/bin/sh
echo "$@" >> "$CALLS"
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out"
case "$out" in
  */gpu-check) echo verdict > "$out/verdict.md"; echo '{}' > "$out/verdict.json"; exit "$CHECK_EXIT";;
  */preset) for f in report.md report.html summary.json; do echo x > "$out/$f"; done; mkdir -p "$out/runs";
            echo big > "$out/runs/steps.parquet"; exit 0;;
esac
"""


def run_script(tmp_path: Path, check_exit: int, *args: str) -> subprocess.CompletedProcess:
    stand_in = tmp_path / "bin" / "batchbench"
    stand_in.parent.mkdir()
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    env = {**os.environ, "BATCHBENCH": str(stand_in), "CALLS": str(tmp_path / "calls"),
           "CHECK_EXIT": str(check_exit), "PRESET_ARGS": "--model tiny --quick"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_runs_gpu_check_then_the_preset_and_packs_what_to_send_back(tmp_path):
    out = tmp_path / "first"
    result = run_script(tmp_path, 1, str(out))
    # A failed check is a finding: the preset still runs, and the script exits with the check's code.
    assert result.returncode == 1, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == f"gpu-check --out {out}/gpu-check"
    assert calls[1] == f"reproduce --preset anyscale-2023 --no-history --out {out}/preset --model tiny --quick"
    with tarfile.open(f"{out}.tar.gz") as archive:
        names = set(archive.getnames())
    assert names == {f"first/{name}" for name in (
        "gpu-check/verdict.md", "gpu-check/verdict.json", "preset/report.md", "preset/report.html",
        "preset/summary.json", "gpu-check.log", "preset.log", "machine.txt")}
    assert "gpu-check exit 1, reproduce --preset anyscale-2023 exit 0" in (out / "machine.txt").read_text()
    assert f"send back {out}.tar.gz" in result.stdout


def test_an_existing_directory_is_refused(tmp_path):
    (tmp_path / "first").mkdir()
    result = run_script(tmp_path, 0, str(tmp_path / "first"))
    assert result.returncode == 2
    assert "exists: name a new directory" in result.stderr
    assert not (tmp_path / "calls").exists()
