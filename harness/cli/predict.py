"""`batchbench predict`: a GPU setup's throughput on paper, per system, beside the published figures.

No server, no GPU: the engine's schedule is simulated block by block and each step is
priced from the hardware card (harness.paper.gpu_predict). Prints Markdown.
"""

from __future__ import annotations

import argparse

from harness.errors import UsageError


def add_parser(subparsers) -> None:
    from harness.paper.gpu_setups import GPUS, MODELS, SETUPS

    parser = subparsers.add_parser(
        "predict",
        help="predict continuous, static and naive throughput on a GPU from the hardware card alone",
        description=f"Known setups (model/gpu): {', '.join(SETUPS)}.",
    )
    parser.add_argument("--model", required=True, choices=MODELS, help="model profile")
    parser.add_argument("--gpu", required=True, choices=GPUS, help="GPU card")
    parser.add_argument(
        "--workloads", required=True, help="comma-separated workload files or names; each must be a burst"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None,
        help="B of the static and naive systems (default: the published one per workload, else the setup's)",
    )
    parser.add_argument(
        "--sensitivity", action="store_true",
        help="also print continuous tok/s with each constant at -20%% and +20%%",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.paper.gpu_setups import find_setup
    from harness.workload.spec import load_specs

    # Bad input is refused before the simulator and the report are imported (seconds).
    try:
        setup = find_setup(args.model, args.gpu)
    except ValueError as exc:
        raise UsageError(f"--model/--gpu: {exc}") from None
    names = [name.strip() for name in args.workloads.split(",") if name.strip()]
    if not names:
        raise UsageError("--workloads: give at least one workload file or name")
    specs = load_specs(names)
    not_burst = [spec.name for spec in specs if spec.arrival.kind != "burst"]
    if not_burst:
        raise UsageError(f"--workloads: predict needs burst workloads (all sent at once): {', '.join(not_burst)}")

    from harness.paper.gpu_predict import predict_workload, sensitivity
    from harness.report.document import to_markdown
    from harness.report.prediction import prediction_blocks

    try:
        predictions = [predict_workload(setup, spec, args.batch_size) for spec in specs]
    except ValueError as exc:
        raise UsageError(f"--workloads: {exc}") from None
    rows = sensitivity(setup, specs, args.batch_size) if args.sensitivity else ()
    print(to_markdown(prediction_blocks(predictions, rows)), end="")
    return 0
