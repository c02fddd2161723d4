"""`batchbench run`: drive one workload against a server and write a run directory."""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import asdict
from pathlib import Path
from typing import cast

from harness.cli.history_options import add_history_arguments
from harness.cli.load_options import add_workers_argument
from harness.cli.server_options import add_server_arguments, server_spec
from harness.driver.backends import BACKENDS, TRANSFORMERS, VLLM, Backend, check_distributable
from harness.driver.timeouts import DEFAULT_FIRST_BYTE_TIMEOUT_S, DEFAULT_STALL_TIMEOUT_S, Timeouts
from harness.driver.work import DEFAULT_MAX_USERS
from harness.errors import UsageError
from harness.settings import Settings
from harness.systems import HF_MODES, HF_SYSTEMS, MODES, SERVER_MODE, HfMode, Mode
from harness.telemetry import TELEMETRY_INTERVAL_S
from launchers import start
from launchers.handle import ServerProcess
from launchers.transformers_server import TransformersSpec, start_transformers


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="run one workload with Locust and record every request")
    parser.add_argument(
        "--workload", required=True, help="workload YAML file or built-in name (e.g. cpu-anyscale-cap128)"
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", help="base URL of a running OpenAI-compatible server")
    target.add_argument(
        "--launch",
        help=f"start a server in this mode: vLLM {', '.join(MODES)}; `transformers serve` {', '.join(HF_MODES)}",
    )
    parser.add_argument("--out", required=True, type=Path, help="new directory for the run's tables and manifest")
    parser.add_argument(
        "--system",
        help="label and client behaviour: continuous, static, naive (padded waves of B from the client),"
        f" {', '.join(HF_SYSTEMS)}; default: the launched mode, or continuous for --endpoint",
    )
    parser.add_argument(
        "--backend", choices=list(BACKENDS),
        help="the kind of server at --endpoint: vllm (lengths forced, token ids counted), transformers"
        " (`transformers serve`: lengths forced, usage cross-checked by re-tokenising the text), or openai"
        " (any other: lengths only capped, never exact); default: the launched server's kind, else vllm",
    )
    parser.add_argument("--tokenizer", help="tokenizer directory for prompts (default: the served model's directory)")
    parser.add_argument("--api-key-env", metavar="NAME", help="send the bearer token held in this environment variable")
    parser.add_argument("--ui", action="store_true", help="also serve Locust's web UI on 127.0.0.1:8089")
    parser.add_argument(
        "--allow-length-mismatch", action="store_true", help="exit 0 even if outputs differ from the plan"
    )
    parser.add_argument("--telemetry-interval-s", type=float, default=TELEMETRY_INTERVAL_S,
                        help=f"how often to poll /metrics (default {TELEMETRY_INTERVAL_S:g})")
    parser.add_argument(
        "--stall-timeout-s",
        type=float,
        default=DEFAULT_STALL_TIMEOUT_S,
        help=f"fail a request whose stream pauses this long after it began (default {DEFAULT_STALL_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--first-byte-timeout-s",
        type=float,
        default=DEFAULT_FIRST_BYTE_TIMEOUT_S,
        help=f"fail a request with no byte this long after sending (default {DEFAULT_FIRST_BYTE_TIMEOUT_S:g}; it"
        " covers queueing in the server, so raise it for bursts that queue longer)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up batches")
    parser.add_argument(
        "--max-users", type=int, default=DEFAULT_MAX_USERS,
        help=f"most concurrent users for open-loop arrivals (default {DEFAULT_MAX_USERS})",
    )
    add_workers_argument(parser)
    parser.add_argument(
        "--master-bind", metavar="HOST[:PORT]",
        help="listen here for --workers workers from other machines (`batchbench worker --master HOST:PORT` on"
        " each) instead of starting them; e.g. 0.0.0.0:5557 (default port 5557)",
    )
    add_history_arguments(parser)
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from harness.workload import build_plan, load_spec

    # Bad input is refused before the load, analysis and history code is imported (seconds).
    spec = load_spec(args.workload)
    system = _system(args)
    backend = _backend(args)
    headers = _headers(args.api_key_env)

    from harness.analysis.assess import assess_run_dirs
    from harness.calibration.marking import calibration_server_info, is_calibration_owner
    from harness.driver.distributed.shard import check_workers, cluster_spec
    from harness.driver.distributed.wire import parse_address
    from harness.driver.endpoint import load_tokenizer, probe_endpoint
    from harness.driver.runner import RunRequest, execute, require_new_dir
    from harness.driver.work import check_fits, user_count
    from harness.history import HistoryStore
    from harness.history.record import record

    # Checked before a server is started, not only when the run begins.
    require_new_dir(args.out)
    store = None if args.no_history else HistoryStore(args.history or Settings.from_env().history_path)
    plan = build_plan(spec)
    cluster = cluster_spec(args.workers, parse_address(args.master_bind) if args.master_bind else None)
    if cluster is not None:
        check_workers(cluster.workers, user_count(plan, system, args.max_num_seqs, args.max_users))
        check_distributable(backend)
    with contextlib.ExitStack() as stack:
        server_info = None
        if args.launch:
            log_dir = args.out.parent / f".{args.out.name}-server"
            server = stack.enter_context(_launch(args, log_dir))
            base_url, model, server_info = server.base_url, server.served_model, asdict(server.info)
        else:
            base_url, model = args.endpoint, args.model
        endpoint = probe_endpoint(base_url, headers, model, backend)
        if is_calibration_owner(endpoint.owned_by):
            server_info = calibration_server_info()
        check_fits(plan, system, args.max_num_seqs, endpoint.max_model_len)
        outcome = execute(
            RunRequest(
                spec=spec,
                system=system,
                batch_size=args.max_num_seqs,
                endpoint=endpoint,
                tokenizer=load_tokenizer(args.tokenizer, endpoint),
                out_dir=args.out,
                headers=headers,
                server=server_info,
                plan=plan,
                telemetry_interval_s=args.telemetry_interval_s,
                timeouts=Timeouts(args.first_byte_timeout_s, args.stall_timeout_s),
                max_users=args.max_users,
                warmup=not args.no_warmup,
                ui=args.ui,
                cluster=cluster,
                backend=backend,
            )
        )
    assessed = assess_run_dirs([args.out], allow_partial=True).assessed
    if store is not None:
        record(store, assessed, "run", args.out.name)
    # Said at the end of every run, not only in a later report: a client-bound figure is the client's.
    for reason in (reason for run in assessed for reason in run.health.client_bound):
        print(f"batchbench: warning: {reason}", file=sys.stderr)
    if outcome.counts.inexact:
        print(
            f"batchbench: warning: {outcome.counts.inexact} of {outcome.counts.ok} ok requests are not known to have"
            f" the length asked for (--backend {backend.name}; length_exact in {args.out / 'records.parquet'})",
            file=sys.stderr,
        )
    return exit_code(outcome, args.allow_length_mismatch, args.out)


def exit_code(outcome, allow_length_mismatch: bool, out: Path) -> int:
    """0 when every owed request has one ok row; else 1, with one line saying why."""
    counts = outcome.counts
    if outcome.row_problems:
        print(f"batchbench: rows of {out} do not match its plan: {'; '.join(outcome.row_problems)}", file=sys.stderr)
        return 1
    tolerated = counts.failures.get("length_mismatch", 0) if allow_length_mismatch else 0
    if counts.failed > tolerated:
        kinds = ", ".join(f"{n} {kind}" for kind, n in counts.failures.items())
        hint = " (--allow-length-mismatch to accept those)" if "length_mismatch" in counts.failures else ""
        print(
            f"batchbench: {counts.failed} of {counts.planned - counts.not_due} requests failed: {kinds}{hint}"
            f" (see error_kind and error in {out / 'records.parquet'})",
            file=sys.stderr,
        )
        return 1
    return 0


def _system(args: argparse.Namespace) -> str:
    system = args.system or args.launch or "continuous"
    if system not in SERVER_MODE:
        raise UsageError(f"unknown system {system!r}: use one of {', '.join(SERVER_MODE)}")
    if args.launch and args.launch not in (*MODES, *HF_MODES):
        raise UsageError(f"unknown mode {args.launch!r}: use one of {', '.join((*MODES, *HF_MODES))}")
    if args.launch and SERVER_MODE[system] != args.launch:
        if system != "naive":
            raise UsageError(f"--system {system} does not match --launch {args.launch}")
        raise UsageError(f"--system {system} pads waves on the client: launch a {SERVER_MODE[system]} server for it")
    return system


def _backend(args: argparse.Namespace) -> Backend:
    """The kind of server the run talks to: as given, else the launched server's kind, else vLLM."""
    launched = TRANSFORMERS if args.launch in HF_MODES else VLLM if args.launch else None
    if args.backend is None:
        return launched or VLLM
    if launched is not None and args.backend != launched.name:
        raise UsageError(f"--launch {args.launch} starts a {launched.name} server: --backend {args.backend}"
                         " is for a server at --endpoint")
    return BACKENDS[args.backend]


def _launch(args: argparse.Namespace, log_dir: Path) -> ServerProcess:
    """Start the server --launch names; _system checked the mode."""
    if args.launch in HF_MODES:
        spec = TransformersSpec(mode=cast(HfMode, args.launch), model=args.model or "tiny", host=args.host,
                                startup_timeout_s=args.startup_timeout_s)
        return start_transformers(spec, log_dir=log_dir)
    return start(server_spec(args, cast(Mode, args.launch)), log_dir=log_dir)


def _headers(api_key_env: str | None) -> dict[str, str]:
    if api_key_env is None:
        return {}
    key = Settings.from_env().variable(api_key_env)
    if not key:
        raise UsageError(f"--api-key-env {api_key_env}: that environment variable is not set")
    return {"Authorization": f"Bearer {key}"}
