"""`batchbench predict`: a GPU setup's throughput on paper, per system, beside the published figures;
with --rates, its latency against offered rate (Poisson arrivals) instead.

No server, no GPU: the engine's schedule is simulated block by block and each step is
priced from the hardware card (harness.paper.gpu_predict; for rates,
harness.rate_sweep.on_paper). Prints Markdown.
"""

from __future__ import annotations

import argparse

from harness.errors import UsageError

# The paper's SLO for a chat service on a GPU (docs/predictions.md#latency-on-paper): a first
# token within a second, and the slowest 1% of answers within about 1.5x what an idle
# engine takes for them (their ~600 tokens of output).
PAPER_SLO_TTFT_P50_S = 1.0
PAPER_SLO_E2E_P99_S = 30.0


def add_parser(subparsers) -> None:
    from harness.paper.gpu_setups import GPUS, MODELS, SETUPS

    parser = subparsers.add_parser(
        "predict",
        help="predict continuous, static and naive throughput on a GPU from the hardware card alone",
        description=f"Known setups (model/gpu): {', '.join(SETUPS)}.",
    )
    from harness.jobs.presets import PRESETS

    parser.add_argument("--model", choices=MODELS, help="model profile (required without --preset)")
    parser.add_argument("--gpu", choices=GPUS, help="GPU card (required without --preset)")
    parser.add_argument(
        "--workloads",
        help="comma-separated workload files or names; each a burst, or with --rates each with Poisson arrivals"
        " (required without --preset)"
    )
    parser.add_argument(
        "--preset", choices=tuple(PRESETS),
        help="a published setup (reproduce --preset): its model, card and workloads, static and naive at its B per"
        " workload, continuous at the engine's own; --model, --gpu, --workloads override it",
    )
    parser.add_argument(
        "--max-num-seqs", dest="batch_size", type=int, default=None,
        help="B of the static and naive systems (default: the published one per workload, else the setup's)",
    )
    # The flag's name before B had one name on every command, kept for scripts.
    parser.add_argument("--batch-size", dest="batch_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sensitivity", action="store_true",
        help="also print continuous tok/s with each constant at -20%% and +20%%",
    )
    parser.add_argument(
        "--rates",
        help="predict latency against offered rate instead: Poisson arrivals at these requests/s"
        " (e.g. 4,8,16,32 for Anyscale's latency runs), continuous and static at B",
    )
    parser.add_argument(
        "--batch-wait-s", type=float, default=0.0,
        help="with --rates: static's max batch delay (default 0, impatient: the published static policy)",
    )
    parser.add_argument("--slo-ttft-p50-s", type=float, default=PAPER_SLO_TTFT_P50_S,
                        help="with --rates: SLO median time to first token, seconds (default %(default)g)")
    parser.add_argument("--slo-e2e-p99-s", type=float, default=PAPER_SLO_E2E_P99_S,
                        help="with --rates: SLO 99th percentile end-to-end latency, seconds (default %(default)g)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.paper.gpu_setups import find_setup
    from harness.workload.spec import load_specs

    # Bad input is refused before the simulator and the report are imported (seconds).
    _fill_from_preset(args)
    try:
        setup = find_setup(args.model, args.gpu)
    except ValueError as exc:
        raise UsageError(f"--model/--gpu: {exc}") from None
    names = [name.strip() for name in args.workloads.split(",") if name.strip()]
    if not names:
        raise UsageError("--workloads: give at least one workload file or name")
    specs = load_specs(names)
    if args.rates is not None:
        return _latency(args, setup, specs)
    not_burst = [spec.name for spec in specs if spec.arrival.kind != "burst"]
    if not_burst:
        raise UsageError(f"--workloads: predict needs burst workloads (all sent at once), or --rates for"
                         f" workloads with Poisson arrivals: {', '.join(not_burst)}")

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


def _fill_from_preset(args: argparse.Namespace) -> None:
    """The model, card and workloads from --preset where not given; UsageError where one is missing."""
    if args.preset is not None:
        from harness.jobs.presets import find_preset

        preset = find_preset(args.preset)
        args.model = args.model or preset.model
        args.gpu = args.gpu or preset.gpu
        args.workloads = args.workloads or ",".join(preset.workloads)
    missing = [flag for flag, value in (("--model", args.model), ("--gpu", args.gpu), ("--workloads", args.workloads))
               if value is None]
    if missing:
        raise UsageError(f"{', '.join(missing)}: required without --preset")


def _latency(args: argparse.Namespace, setup, specs) -> int:
    """Latency against offered rate on paper, per Poisson workload."""
    from harness.cli.options import positive_numbers

    rates = sorted(set(positive_numbers("--rates", args.rates)))
    if args.sensitivity:
        raise UsageError("--sensitivity: varies the throughput prediction of bursts; drop it with --rates")
    bursts = [spec.name for spec in specs if spec.arrival.kind == "burst"]
    if bursts:
        raise UsageError(f"--workloads: --rates needs workloads with Poisson arrivals, not bursts: {', '.join(bursts)}")

    from harness.rate_sweep.curve import SloSeconds
    from harness.rate_sweep.on_paper import curve_blocks, predict_curves
    from harness.report.document import to_markdown

    slo = SloSeconds(args.slo_ttft_p50_s, args.slo_e2e_p99_s)
    blocks = []
    for spec in specs:
        try:
            curves = predict_curves(setup, spec, rates, slo, args.batch_size, args.batch_wait_s)
        except ValueError as exc:
            raise UsageError(f"--workloads: {exc}") from None
        blocks += curve_blocks(curves)
    print(to_markdown(blocks), end="")
    return 0
