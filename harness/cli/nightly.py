"""`batchbench nightly --suite FILE`: a night's runs, appended to the history, gated, trended.

Exit 0 when every configuration passes (or starts its baseline), 1 on a regression,
3 when a configuration stays inconclusive after the suite's extra repetitions, 2 on bad
input. See harness.nightly.night for what a night does, in order.
"""

from __future__ import annotations

import argparse
import logging
import platform
from datetime import datetime
from pathlib import Path

from harness.cli.gate import add_gate_outputs, destinations
from harness.cli.load_options import add_workers_argument
from workloads import list_builtin_suites

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("nightly", help="run a suite, append it to the history, gate it against the last"
                                   " accepted nights and write the trend report (exit 0, 1 or 3)")
    parser.add_argument("--suite", required=True,
                        help=f"suite file, or a shipped suite: {', '.join(list_builtin_suites())}")
    parser.add_argument("--out", type=Path, help="night directory (default: reports/nightly-<suite>-<date>-<host>)")
    parser.add_argument("--accept", action="store_true", help="accept tonight into future baselines whatever the"
                        " verdict (after an intended change of throughput)")
    add_workers_argument(parser)
    add_gate_outputs(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.cli.gate_publish import publish
    from harness.driver.distributed.shard import cluster_spec
    from harness.driver.runner import require_new_dir
    from harness.history import HistoryStore
    from harness.nightly.changes import require_otava
    from harness.nightly.night import run_night
    from harness.nightly.suite import load_suite
    from harness.nightly.trend import trend_blocks, trend_title
    from harness.report.render import write_blocks
    from harness.settings import Settings
    from harness.sweep.runs import check_sweep_workers

    require_otava()  # before any run: the trend at the end needs it
    settings = Settings.from_env()
    loaded = load_suite(args.suite)
    cluster = cluster_spec(args.workers)
    check_sweep_workers(loaded.specs, loaded.suite.systems, loaded.suite.server.max_num_seqs, cluster)
    out = args.out or Path("reports") / f"nightly-{loaded.suite.name}-{datetime.now():%Y%m%d-%H%M%S}-{platform.node()}"
    require_new_dir(out, "night directory")
    # Opened (and checked) before any server starts: a bad history file costs nothing.
    store = HistoryStore(args.history or settings.history_path)
    night = run_night(loaded, out, store, args.accept, cluster)
    history = {}
    for config in night.result.configs:
        tonight = next(row for row in night.repetitions if row.config_key == config.config_key)
        history[config.config_key] = store.comparable(config.config_key, hardware_key=tonight.hardware_key,
                                                      server=tonight.server)
    _, page, _ = write_blocks(trend_blocks(loaded.suite.name, night.result, history, night.untested_vllm), out,
                              trend_title(loaded.suite.name, night.untested_vllm), "trend")
    publish(night.result, destinations(args, settings))
    logger.info(
        f"{len(night.repetitions)} repetitions ({night.extra_repetitions} extra) appended to {store.path};"
        f" trend: {page}"
    )
    return night.result.exit_code
