"""Do back-to-back reproductions agree? Their cells, ratios and findings side by side.

Takes the report directories of several `make reproduce` runs (their summary.json) and,
for every headline cell (system x spread level, total tok/s) and every headline ratio
(measured and at one machine speed), prints each reproduction's median, the median of
them all, and the largest deviation from it. The issue-7 target: every headline cell
within ±5% of the median of three, the same findings in all, no UNSTABLE cell. The
findings compared are the ones the report's acceptance draws: the ordering continuous >
static > naive at every level, and both gaps growing from the narrowest spread to the
widest.

    .venv/bin/python benchmarks/reproducibility.py REPORT_DIR REPORT_DIR REPORT_DIR [--out FILE]

Writes benchmarks/results/reproducibility.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.05


def findings(summary: dict[str, Any]) -> dict[str, bool]:
    """The acceptance findings, from the cells' medians and the headline's ratios."""
    cells = {(c["system"], c["level"]): c["total_tok_s"]["median"] for c in summary["cells"]}
    levels = sorted({level for _, level in cells if isinstance(level, int)})
    found = {f"continuous > static > naive at {level}": cells[("continuous", level)] > cells[("static", level)]
             > cells[("naive", level)] for level in levels}
    ratios = {row["level"]: row["ratios"] for row in summary["headline"]}
    for name in ("continuous/static", "continuous/naive"):
        found[f"{name} grows from cap {levels[0]} to cap {levels[-1]}"] = (
            ratios[levels[-1]][name]["median"] > ratios[levels[0]][name]["median"])
    return found


def spread(values: list[float]) -> tuple[float, float]:
    """(median, largest relative deviation from it)."""
    middle = statistics.median(values)
    return middle, max(abs(v / middle - 1) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "reproducibility.json")
    args = parser.parse_args()
    summaries = [json.loads((report / "summary.json").read_text()) for report in args.reports]
    rows: list[dict[str, Any]] = []
    keys = [(c["system"], c["level"]) for c in summaries[0]["cells"]]
    for system, level in keys:
        for field in ("total_tok_s", "total_tok_s_at_one_speed"):
            values = [next(c for c in s["cells"] if (c["system"], c["level"]) == (system, level))[field]["median"]
                      for s in summaries]
            middle, worst = spread(values)
            rows.append({"what": f"{system} at {level}", "figure": field, "values": values, "median": middle,
                         "max_deviation": worst})
    for level in [row["level"] for row in summaries[0]["headline"]]:
        for field in ("ratios", "ratios_at_one_speed"):
            for name in ("continuous/static", "continuous/naive"):
                values = [next(r for r in s["headline"] if r["level"] == level)[field][name]["median"]
                          for s in summaries]
                middle, worst = spread(values)
                rows.append({"what": f"{name} at {level}", "figure": field, "values": values, "median": middle,
                             "max_deviation": worst})
    found = [findings(s) for s in summaries]
    unstable = [sum(not c["stable"] for c in s["cells"]) for s in summaries]
    for row in rows:
        mark = "ok" if row["max_deviation"] <= TARGET else "MISS"
        print(f"{row['what']:28} {row['figure']:26} " + " ".join(f"{v:9.2f}" for v in row["values"])
              + f"  median {row['median']:9.2f}  max dev {row['max_deviation']:6.1%} {mark}")
    same = all(f == found[0] for f in found)
    print(f"findings identical in all: {same}; {found[0]}")
    print(f"UNSTABLE cells per reproduction: {unstable}")
    args.out.write_text(json.dumps({"reports": [str(r) for r in args.reports], "rows": rows, "findings": found,
                                    "findings_identical": same, "unstable_cells": unstable,
                                    "within_target": {figure: sum(r["max_deviation"] <= TARGET for r in rows
                                                                  if r["figure"] == figure)
                                                      for figure in dict.fromkeys(r["figure"] for r in rows)},
                                    "rows_per_figure": len(keys)}, indent=2))


if __name__ == "__main__":
    main()
