"""A night-long soak: load against one continuous server for an hour, faults in the middle.

One continuous vLLM server (tiny model, B=16), launched here, serves four phases of equal
length, each one `batchbench run` process against it, each appending its run to one
results history, as a night's runs do:
  1. closed          16 users in a closed loop;
  2. poisson         Poisson arrivals at 4 requests/s (about a third of the server's capacity);
  3. closed-sigstop  as 1, with the server's whole process group SIGSTOPped in the
                     phase's middle for --pause-s (longer than the run's stall timeout,
                     so the requests in flight then fail as stalled) and then SIGCONTed;
  4. poisson-killed  as 2, with the server's process group SIGKILLed in the phase's
                     middle and a new server launched on the same port.
Every request has a 64-token prompt and exactly 128 output tokens; each phase's
workload runs for its duration (`duration_s`), so its plan is what it had time to send.

Every --sample-s the harness process's resident memory, open file descriptors and
threads are read (psutil), and the load it has recorded (its journal's rows). Checked
after each phase and at the end:
- every due request has exactly one row (rows = planned - not due), ok or failed, and
  the failures are counted by kind;
- memory and file descriptors are flat: per phase, the change from the first sample
  after warm-up to the last, and the fitted slope in MiB per hour;
- the history opens, passes SQLite's integrity check and holds every run appended;
- `batchbench analyze --allow-partial` of the four runs writes its report;
- the system temp dir holds no entry that was not there before.

    .venv/bin/python benchmarks/soak.py [--minutes 60] [--out runs/soak-<time>]

Writes benchmarks/results/soak.json (every sample and check) and prints a table. It
exits 1 when a check fails. Run nothing else meanwhile: the two cores are the server's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow.parquet as pq
import yaml

from harness.errors import UsageError
from harness.history import HistoryStore
from harness.rundir.journal import JournalFiles
from harness.rundir.manifest import RunManifest
from launchers import ServerSpec, start
from launchers.handle import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
MODEL = "tiny"
BATCH_SIZE = 16
PROMPT_TOKENS = 64
OUTPUT_TOKENS = 128
RATE = 4.0
# Shorter than --pause-s, so a pause fails the requests in flight (the fault the phase is for).
STALL_TIMEOUT_S = 30
# Memory and descriptors are judged from the first sample this long into a phase: the
# process has imported its modules, built its prompts and opened its connections by then.
WARMUP_S = 90


@dataclass(frozen=True)
class Phase:
    """One phase: its load and the fault injected in its middle (None: none)."""

    name: str
    arrival: dict[str, Any]
    fault: str | None = None


PHASES = (
    Phase("closed", {"kind": "closed", "users": BATCH_SIZE}),
    Phase("poisson", {"kind": "poisson", "rate": RATE}),
    Phase("closed-sigstop", {"kind": "closed", "users": BATCH_SIZE}, "sigstop"),
    Phase("poisson-killed", {"kind": "poisson", "rate": RATE}, "kill"),
)


@dataclass
class Sample:
    """The harness process at one moment of a phase."""

    phase: str
    t_s: float
    rss_mib: float
    fds: int
    threads: int
    rows: int


@dataclass
class PhaseResult:
    """What one phase ran and left on disk."""

    name: str
    fault: str | None
    seconds: float
    exit_code: int
    events: list[str] = field(default_factory=list)
    planned: int = 0
    not_due: int = 0
    rows: int = 0
    distinct_ids: int = 0
    ok: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    every_due_row_once: bool = False
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    rss_max_mib: float = 0.0
    rss_slope_mib_per_h: float = 0.0
    fds_start: int = 0
    fds_end: int = 0
    fds_max: int = 0


class Server:
    """The server under soak: launched, paused, killed and launched again on the same port."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.launches = 0
        self.port: int | None = None
        self.handle: ServerProcess = self._launch()

    def _launch(self) -> ServerProcess:
        self.launches += 1
        deadline = time.monotonic() + 120
        while True:
            try:
                handle = start(ServerSpec(mode="continuous", model=MODEL, max_num_seqs=BATCH_SIZE, port=self.port),
                               log_dir=self.out / f"server-{self.launches}")
                break
            except UsageError:
                # The killed server's port may take a moment to be free again.
                if self.port is None or time.monotonic() > deadline:
                    raise
                time.sleep(2)
        self.port = int(handle.base_url.rsplit(":", 1)[1])
        return handle

    @property
    def base_url(self) -> str:
        return self.handle.base_url

    def pause(self, seconds: float) -> None:
        os.killpg(self.handle.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(self.handle.pid, signal.SIGCONT)

    def kill_and_relaunch(self) -> float:
        """SIGKILL the whole server, launch a new one on its port; the seconds it was away."""
        began = time.monotonic()
        os.killpg(self.handle.pid, signal.SIGKILL)
        self.handle.stop()
        self.handle = self._launch()
        return time.monotonic() - began

    def stop(self) -> None:
        self.handle.stop()


def journal_rows(run_dir: Path) -> int:
    """Rows the run has journalled so far (0 before its journal exists)."""
    path = JournalFiles.in_dir(run_dir).records
    if not path.is_file():
        return 0
    with path.open("rb") as journal:
        return sum(1 for _ in journal)


def sample(process: psutil.Process, phase: str, began: float, run_dir: Path) -> Sample | None:
    """The harness process now; None once it has exited."""
    try:
        with process.oneshot():
            return Sample(phase, time.monotonic() - began, process.memory_info().rss / 2**20, process.num_fds(),
                          process.num_threads(), journal_rows(run_dir))
    except psutil.NoSuchProcess:
        return None


def write_workload(phase: Phase, index: int, seconds: float, directory: Path) -> Path:
    spec = {
        "name": f"soak-{phase.name}", "seed": index, "duration_s": seconds, "endpoint": "completions",
        "prompt_tokens": {"kind": "fixed", "value": PROMPT_TOKENS},
        "output_tokens": {"kind": "fixed", "value": OUTPUT_TOKENS}, "arrival": phase.arrival,
    }
    path = directory / f"{phase.name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_phase(phase: Phase, index: int, seconds: float, server: Server, out: Path, args: argparse.Namespace,
              samples: list[Sample]) -> PhaseResult:
    """One `batchbench run` of the phase, sampled, with its fault in the middle."""
    workload = write_workload(phase, index, seconds, out / "workloads")
    run_dir = out / "runs" / phase.name
    argv = [sys.executable, "-m", "harness.cli", "run", "--workload", str(workload), "--endpoint", server.base_url,
            "--model", MODEL, "--max-num-seqs", str(BATCH_SIZE), "--out", str(run_dir),
            "--history", str(out / "history.sqlite"), "--stall-timeout-s", str(STALL_TIMEOUT_S)]
    result = PhaseResult(phase.name, phase.fault, seconds, exit_code=-1)
    began = time.monotonic()
    with (out / f"{phase.name}.log").open("w") as log:
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    process = psutil.Process(child.pid)
    fault = threading.Thread(target=inject, args=(phase, server, run_dir, seconds, args, result), daemon=True)
    fault.start()
    while child.poll() is None:
        taken = sample(process, phase.name, began, run_dir)
        if taken is not None:
            samples.append(taken)
            print(f"  {phase.name:15s} {taken.t_s:6.0f} s  rss {taken.rss_mib:7.1f} MiB  fds {taken.fds:4d}"
                  f"  threads {taken.threads:3d}  rows {taken.rows:6d}", file=sys.stderr, flush=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=args.sample_s)
    fault.join()
    result.exit_code = child.returncode
    result.seconds = time.monotonic() - began
    account(result, run_dir, [taken for taken in samples if taken.phase == phase.name])
    return result


def inject(phase: Phase, server: Server, run_dir: Path, seconds: float, args: argparse.Namespace,
           result: PhaseResult) -> None:
    """The phase's fault, half way through its load (timed from its first journalled row)."""
    if phase.fault is None:
        return
    while journal_rows(run_dir) == 0:
        time.sleep(1)
    time.sleep(seconds / 2)
    stamp = datetime.now().strftime("%H:%M:%S")
    if phase.fault == "sigstop":
        server.pause(args.pause_s)
        result.events.append(f"{stamp} server SIGSTOPped for {args.pause_s:.0f} s, then SIGCONTed")
    else:
        away = server.kill_and_relaunch()
        result.events.append(f"{stamp} server SIGKILLed; a new one served on the same port {away:.0f} s later")


def account(result: PhaseResult, run_dir: Path, samples: list[Sample]) -> None:
    """The phase's rows against its plan, and its memory and descriptors over time."""
    manifest = RunManifest.model_validate_json((run_dir / "manifest.json").read_text())
    records = pq.read_table(run_dir / "records.parquet", columns=["request_id", "ok", "error_kind"]).to_pylist()
    result.planned, result.not_due = manifest.counts.planned, manifest.counts.not_due
    result.rows = len(records)
    result.distinct_ids = len({row["request_id"] for row in records})
    result.ok = sum(row["ok"] for row in records)
    result.failures = dict(Counter(row["error_kind"] for row in records if not row["ok"]))
    result.every_due_row_once = result.rows == result.distinct_ids == result.planned - result.not_due
    steady = [taken for taken in samples if taken.t_s >= WARMUP_S] or samples
    if steady:
        result.rss_start_mib, result.rss_end_mib = steady[0].rss_mib, steady[-1].rss_mib
        result.rss_max_mib = max(taken.rss_mib for taken in steady)
        result.fds_start, result.fds_end = steady[0].fds, steady[-1].fds
        result.fds_max = max(taken.fds for taken in steady)
    if len(steady) >= 3:
        hours = np.array([taken.t_s for taken in steady]) / 3600
        result.rss_slope_mib_per_h = float(np.polyfit(hours, [taken.rss_mib for taken in steady], 1)[0])


def check_history(path: Path, runs: int) -> dict[str, Any]:
    """The history file after the soak: SQLite's integrity check and the runs it holds."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
        integrity = connection.execute("PRAGMA integrity_check").fetchone()[0]
    frame = HistoryStore(path).frame()
    held = sorted(frame["run_dir"].unique()) if "run_dir" in frame else []
    return {"integrity": integrity, "rows": len(frame), "runs": held, "intact": integrity == "ok" and len(held) == runs}


def temp_entries() -> set[str]:
    return set(os.listdir(tempfile.gettempdir()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="the four phases' load, in all (default 60)")
    parser.add_argument("--pause-s", type=float, default=60.0, help="how long the server stays SIGSTOPped")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between samples of the harness")
    parser.add_argument("--out", type=Path, default=None, help="new directory (default runs/soak-<time>)")
    parser.add_argument("--result", default="soak.json", help="file name under benchmarks/results/")
    args = parser.parse_args()
    if args.minutes <= 0 or args.pause_s <= STALL_TIMEOUT_S or args.sample_s <= 0:
        parser.error(f"--minutes and --sample-s must be positive, --pause-s over the stall timeout ({STALL_TIMEOUT_S})")
    out = args.out or ROOT / "runs" / f"soak-{datetime.now():%Y%m%d-%H%M%S}"
    if out.exists():
        parser.error(f"--out {out}: already exists")
    (out / "workloads").mkdir(parents=True)
    temp_before = temp_entries()
    seconds = args.minutes * 60 / len(PHASES)
    samples: list[Sample] = []
    results = []
    began = time.monotonic()
    server = Server(out / "servers")
    try:
        for index, phase in enumerate(PHASES):
            print(f"phase {index + 1} of {len(PHASES)}: {phase.name}, {seconds:.0f} s", file=sys.stderr, flush=True)
            results.append(run_phase(phase, index, seconds, server, out, args, samples))
    finally:
        server.stop()
    analyzed = subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", *(str(out / "runs" / p.name) for p in PHASES),
         "--out", str(out / "report"), "--allow-partial"], capture_output=True, text=True, cwd=ROOT)
    history = check_history(out / "history.sqlite", len(PHASES))
    new_temp = sorted(temp_entries() - temp_before)
    report = {
        "date": datetime.now().isoformat(timespec="seconds"), "out": str(out), "minutes": args.minutes,
        "wall_minutes": (time.monotonic() - began) / 60, "server_launches": server.launches,
        "phases": [asdict(result) for result in results], "samples": [asdict(taken) for taken in samples],
        "history": history, "report_written": analyzed.returncode == 0 and (out / "report" / "report.md").is_file(),
        "analyze_exit": analyzed.returncode, "analyze_stderr_tail": analyzed.stderr[-2000:],
        "new_temp_entries": new_temp,
    }
    report["passed"] = (all(result.every_due_row_once for result in results) and history["intact"]
                        and report["report_written"] and not new_temp)
    path = ROOT / "benchmarks" / "results" / args.result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"\nwritten: {path}")
    return 0 if report["passed"] else 1


def print_table(report: dict[str, Any]) -> None:
    print(f"{'phase':15s} {'exit':>4s} {'planned':>7s} {'not due':>7s} {'rows':>6s} {'ok':>6s}  failures"
          f"  {'rss MiB start/end/max':>22s} {'MiB/h':>6s} {'fds start/end/max':>17s}")
    for phase in report["phases"]:
        failures = ", ".join(f"{kind} {count}" for kind, count in phase["failures"].items()) or "-"
        rss = f"{phase['rss_start_mib']:.0f}/{phase['rss_end_mib']:.0f}/{phase['rss_max_mib']:.0f}"
        fds = f"{phase['fds_start']}/{phase['fds_end']}/{phase['fds_max']}"
        print(f"{phase['name']:15s} {phase['exit_code']:4d} {phase['planned']:7d} {phase['not_due']:7d}"
              f" {phase['rows']:6d} {phase['ok']:6d}  {failures}  {rss:>22s} {phase['rss_slope_mib_per_h']:6.1f}"
              f" {fds:>17s}")
        for event in phase["events"]:
            print(f"    {event}")
    history = report["history"]
    print(f"history: integrity {history['integrity']}, {len(history['runs'])} runs; report written:"
          f" {report['report_written']}; new temp entries: {report['new_temp_entries'] or 'none'};"
          f" passed: {report['passed']}")


if __name__ == "__main__":
    sys.exit(main())
