"""`batchbench gate`: is a candidate's throughput a regression against a baseline?

The candidate is a run, a reproduce or a nightly directory. The baseline is a pinned
result directory (--baseline) or, by default, the last K accepted nights of
each configuration in the results history, from the same machine and server version
(unless --pool-hardware / --pool-servers). Exit 0 pass, 1 regression, 3
inconclusive, 2 bad input. This command judges stored results; `batchbench nightly`,
which launches the server, adds repetitions to an inconclusive configuration by itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.gate.rule import BASELINE_NIGHTS, DEFAULT_RULE, METRIC_CHOICES, GateRule
from harness.settings import HISTORY_DEFAULT_HELP, Settings

if TYPE_CHECKING:
    from harness.cli.gate_publish import GateDestinations


def add_gate_outputs(parser: argparse.ArgumentParser) -> None:
    """Options of every command that gives a gate verdict (gate, nightly)."""
    parser.add_argument("--history", type=Path, help=f"results history file (default: {HISTORY_DEFAULT_HELP})")
    parser.add_argument("--junit-xml", type=Path, help="also write the verdict as JUnit XML (one case per config)")
    parser.add_argument("--json", dest="json_file", type=Path, help="also write the verdict as JSON")
    parser.add_argument("--markdown", type=Path, help="also write the verdict as Markdown (it is appended to"
                        " $GITHUB_STEP_SUMMARY when that is set)")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("gate", help="judge a candidate's throughput against a baseline: pass, regression"
                                   " or inconclusive (exit 0, 1, 3)")
    parser.add_argument("candidate", type=Path, help="a run, reproduce or nightly directory")
    parser.add_argument("--baseline", type=Path, help="a pinned baseline directory (default: the history's last"
                        " accepted nights)")
    parser.add_argument("--last", type=int, default=BASELINE_NIGHTS, help="baseline from history: the last K"
                        f" accepted nights (default {BASELINE_NIGHTS})")
    parser.add_argument("--threshold", type=float, default=DEFAULT_RULE.threshold, help="smallest drop called a"
                        f" regression (default {DEFAULT_RULE.threshold:g}; widened to 3x the baseline's between-night"
                        " noise)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_RULE.alpha, help="significance of the one-sided"
                        f" Mann-Whitney test (default {DEFAULT_RULE.alpha:g})")
    parser.add_argument("--margin", type=float, default=DEFAULT_RULE.margin, help="a second test must show the"
                        " candidate slower than the baseline lowered by this share (default"
                        f" {DEFAULT_RULE.margin:g}), not merely slower")
    parser.add_argument("--metric", choices=METRIC_CHOICES, default="auto", help="figure compared (default auto: p50"
                        " E2E, at one machine speed where every run has an engine log, for Poisson arrivals, whose"
                        " throughput is the offered rate; else the engine's total tok/s when every repetition has"
                        " it, else the client's)")
    parser.add_argument("--pool-hardware", action="store_true", help="baseline from any machine, not only the"
                        " candidate's")
    parser.add_argument("--pool-servers", action="store_true", help="baseline from any server version, not only the"
                        " candidate's")
    add_gate_outputs(parser)
    parser.set_defaults(handler=run)


def destinations(args: argparse.Namespace, settings: Settings) -> GateDestinations:
    """The files a gate verdict goes to, from the options `add_gate_outputs` defined."""
    from harness.cli.gate_publish import GateDestinations

    return GateDestinations(args.junit_xml, args.json_file, args.markdown, settings.step_summary)


def run(args: argparse.Namespace) -> int:
    from harness.cli.gate_publish import publish
    from harness.gate.baselines import from_directory, from_history
    from harness.gate.compare import gate
    from harness.history import HistoryStore
    from harness.history.from_dir import repetitions_from_dir

    settings = Settings.from_env()
    rule = GateRule(threshold=args.threshold, alpha=args.alpha, margin=args.margin)
    candidate = repetitions_from_dir(args.candidate)
    if args.baseline is not None:
        baselines = from_directory(repetitions_from_dir(args.baseline), f"pinned {args.baseline}")
    else:
        store = HistoryStore(args.history or settings.history_path)
        baselines = from_history(store, candidate, args.last, args.pool_hardware, args.pool_servers)
    result = gate(candidate, baselines, rule, args.metric)
    publish(result, destinations(args, settings))
    return result.exit_code
