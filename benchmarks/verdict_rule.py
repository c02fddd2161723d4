"""The headline verdict rule (harness.analysis.health.headline_health) applied to earlier reproductions.

Each argument is a report's summary.json, from any commit since cells listed their runs:
every run's total tok/s (and, where the report had them, at one machine speed), so each
level's ratios are rebuilt per repetition (runs paired by their -rN suffix, as the
reproduction interleaved them) and estimated as today's report does. A run the report
found unstable is rebuilt from its failed checks where summary.json kept them (a check
that the run's own verdict can make UNSTABLE: RUN_CHECKS), else from the first reason its
cell gave ("1 of 3 runs unstable (run lasted 19.7 s ...)").

For each level it prints the verdict the report gave, the verdict of today's rule, and
how far the ratio shown moved (the measured ratios' half range; the rule's limit ±5%).

    .venv/bin/python benchmarks/verdict_rule.py SUMMARY.json... [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.analysis.cells import HEADLINE_RATIOS
from harness.analysis.health import MAX_HEADLINE_HALF_WIDTH, Check, HeadlineMember, Health, headline_health
from harness.analysis.stats import Estimate, paired_ratio_ci

# Run checks whose failure can make a run UNSTABLE (the others are notes wherever a step log exists).
RUN_CHECKS = ("makespan", "client vs engine", "token count", "front-end starvation", "client CPU share",
              "client loop lag vs ITL")
CELL_REASON = re.compile(r"^\d+ of \d+ runs unstable \((?P<why>.*)\)$")
DISAGREEMENT = re.compile(r"client and engine throughput differ by (?P<value>[-+][\d.]+)%")
REPETITION = re.compile(r"-r(?P<rep>\d+)$")


def run_health(run: dict[str, Any], cell_reasons: list[str]) -> Health:
    """A run's health as its report judged it: its failed checks, or its cell's first reason."""
    if run.get("stable", True):
        return Health(())
    checks = run.get("checks")
    if checks:
        return Health(tuple(Check(name, check["value"], check["limit"], False, "unstable", name)
                            for name, check in checks.items() if not check["passed"] and name in RUN_CHECKS))
    why = next((m["why"] for m in map(CELL_REASON.match, cell_reasons) if m), "unstable")
    if why.startswith("run lasted"):
        return Health((Check("makespan", 0.0, 20.0, False, "unstable", why),))
    disagreement = DISAGREEMENT.search(why)
    if disagreement:
        value = abs(float(disagreement["value"])) / 100
        return Health((Check("client vs engine", value, 0.02, False, "unstable", why),))
    return Health((Check("other", 1.0, 0.0, False, "unstable", why),))


def paired(runs_a: dict[int, float], runs_b: dict[int, float]) -> Estimate | None:
    """The paired ratio of two systems' runs by repetition; None unless every repetition has both."""
    reps = sorted(runs_a)
    if not reps or sorted(runs_b) != reps or not all(runs_a[r] and runs_b[r] for r in reps):
        return None
    return paired_ratio_ci([runs_a[r] for r in reps], [runs_b[r] for r in reps])


def judge(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Each level of `summary`: the verdict its report gave, today's, and how far its ratios moved."""
    figures: dict[tuple[Any, str, str], dict[int, float]] = defaultdict(dict)
    healths: dict[tuple[Any, str], list[Health]] = defaultdict(list)
    for cell in summary["cells"]:
        for run in cell["runs"]:
            match = REPETITION.search(run["run"])
            if match is None:
                continue
            rep = int(match["rep"])
            figures[cell["level"], cell["system"], "measured"][rep] = run["total_tok_s"]
            if run.get("total_tok_s_at_one_speed"):
                figures[cell["level"], cell["system"], "at one speed"][rep] = run["total_tok_s_at_one_speed"]
            healths[cell["level"], cell["system"]].append(run_health(run, cell.get("reasons") or []))
    rows = []
    for row in summary["headline"]:
        level = row["level"]
        measured: dict[str, Estimate] = {}
        at_one_speed: dict[str, Estimate] = {}
        for top, bottom in HEADLINE_RATIOS:
            name = f"{top}/{bottom}"
            for kind, into in (("measured", measured), ("at one speed", at_one_speed)):
                ratio = paired(figures[level, top, kind], figures[level, bottom, kind])
                if ratio is not None:
                    into[name] = ratio
        systems = dict.fromkeys(system for pair in HEADLINE_RATIOS for system in pair)
        members = [HeadlineMember(system, tuple(healths[level, system])) for system in systems
                   if healths[level, system]]
        today = headline_health(measured, members, at_one_speed)
        rows.append({
            "level": level,
            "given": row.get("verdict") or ("stable" if row["stable"] else "unstable"),
            "today": today.verdict,
            "why": today.briefs,
            "warnings": today.run_warnings,
            "moved": {name: ratio.repeat_spread for name, ratio in measured.items()},
            "at_one_speed": {name: ratio.repeat_spread for name, ratio in at_one_speed.items()},
            "moved_beyond_tolerance": any(ratio.repeat_spread > MAX_HEADLINE_HALF_WIDTH for ratio in measured.values()),
            "given_reasons": row.get("reasons") or [],
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summaries", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    for path in args.summaries:
        summary = json.loads(path.read_text())
        rows = judge(summary)
        results[str(path)] = rows
        shas = ", ".join(sha[:7] for sha in summary["metadata"].get("git_shas") or [])
        print(f"{path} (git {shas}): exit {3 if any(r['given'] == 'unstable' for r in rows) else 0} then,"
              f" {3 if any(r['today'] == 'unstable' for r in rows) else 0} today")
        for r in rows:
            moved = ", ".join(f"{name} ±{spread:.1%}" for name, spread in r["moved"].items())
            held = ", ".join(f"±{spread:.1%}" for spread in r["at_one_speed"].values()) or "none"
            print(f"  cap {r['level']}: {r['given']} -> {r['today']}; measured {moved}; at one speed {held}")
            for line in (*r["given_reasons"], *r["warnings"]):
                print(f"      {line}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
