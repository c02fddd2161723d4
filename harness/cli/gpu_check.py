"""`batchbench gpu-check`: is this installation measuring what it claims, on this machine's real engine?

One command after `pip install -e '.[gpu]'`, no download: the B+1 mode check, the step log
against vLLM's own counters, the step recorder's cost, the client's headroom, and a small
reproduction set against the on-paper prediction for the GPU found (harness.jobs.gpu_check,
harness.checks). On a GPU it serves the `llama-3.1-8b` profile (dummy weights) at full
size; without one, the tiny model at CPU sizes (harness.checks.sizes). This module only
parses: the flags (from the job's config), then prints the verdict, written to verdict.md
and verdict.json in --out; exit 0 when every check passes, 1 when any fails.
"""

from __future__ import annotations

import argparse

from harness.cli.flags import add_model_arguments, model_of
from harness.jobs.gpu_check import GpuCheck


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "gpu-check",
        help="check the installation on this machine's real engine and write one verdict",
        description="Check the installation on this machine's real engine (a GPU, else the CPU) and write one"
        " verdict: exit 0 when every check passes, 1 when any fails.",
    )
    add_model_arguments(parser, GpuCheck)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.checks.verdict import render_terminal, write_verdict
    from harness.jobs.gpu_check import check_installation

    verdict, out = check_installation(model_of(GpuCheck, args))
    markdown, as_json = write_verdict(verdict, out)
    print(render_terminal(verdict))
    print(f"verdict: {markdown} {as_json}")
    return 0 if verdict.passed else 1
