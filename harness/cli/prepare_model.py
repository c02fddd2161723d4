"""`batchbench prepare-model`: make (or find) a local model directory and print its path."""

from __future__ import annotations

import argparse

from launchers import PROFILES, resolve_model


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "prepare-model",
        help="make a model directory without downloads (tiny, GPU architecture profiles)",
        description="Make a local model directory: "
        + "; ".join(f"{p.name}: {p.description}" for p in PROFILES.values()),
    )
    parser.add_argument(
        "model",
        nargs="?",
        default="tiny",
        help="tiny (default), a profile name (PROFILE:layers=N keeps only its first N layers), a directory or a hub id",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    resolved = resolve_model(args.model)
    notes = [f"--load-format {resolved.load_format}"] if resolved.load_format != "auto" else []
    if resolved.profile is not None and resolved.layers != PROFILES[resolved.profile].layers:
        notes.append(f"{resolved.layers} of {PROFILES[resolved.profile].layers} layers")
    suffix = f" ({', '.join(notes)})" if notes else ""
    print(f"{resolved.path}{suffix}")
    return 0
