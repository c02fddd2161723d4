"""What planning from a large trace costs: a million-row file, the plan for its first 10,000 requests.

Writes a synthetic trace (`batchbench make-trace`'s generator) of `--rows` rows in each
layout (Azure CSV, Mooncake JSONL, and the CSV's rows as Parquet), then, for each, in a
fresh process: loads a workload pointing at it with `num_requests` = `--requests`, builds
the plan, and reports the wall time of reading plus planning and the process's peak RSS
(ru_maxrss, which includes the interpreter and its imports: measured alone as `baseline`).

    .venv/bin/python benchmarks/trace_plan.py [--rows 1000000] [--requests 10000]

Writes benchmarks/results/trace_plan.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from harness.workload.synthetic_trace import SyntheticTrace, write_trace

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter, so that its peak RSS is that of one plan alone.
CHILD = """
import json, resource, sys, time
started = time.perf_counter()
from harness.workload import build_plan, load_spec
imported = time.perf_counter()
plan = build_plan(load_spec(sys.argv[1])) if sys.argv[1] != "-" else None
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "plan_s": done - imported,
                  "requests": len(plan.requests) if plan else 0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(workload: Path | None) -> dict:
    """One fresh process's import and plan times and peak RSS (no workload: the baseline)."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(workload) if workload else "-"],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    results: dict = {"rows": args.rows, "requests": args.requests, "baseline": measure(None), "traces": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        csv = folder / "day.csv"
        write_trace(SyntheticTrace(rows=args.rows), csv)
        jsonl = folder / "day.jsonl"
        write_trace(SyntheticTrace(rows=args.rows, layout="mooncake"), jsonl)
        parquet = folder / "day.parquet"
        pq.write_table(pacsv.read_csv(csv), parquet)
        for name, path, preset in (("azure-csv", csv, "azure"), ("mooncake-jsonl", jsonl, "mooncake"),
                                   ("azure-parquet", parquet, "azure")):
            workload = folder / f"{name}.yaml"
            workload.write_text(json.dumps({"name": name, "seed": 0, "num_requests": args.requests,
                                            "trace": {"path": path.name, "preset": preset}}))
            result = measure(workload)
            result["file_mb"] = path.stat().st_size / 1e6
            results["traces"][name] = result
            print(f"{name:15s} {result['file_mb']:7.1f} MB  plan {result['plan_s']:5.2f} s"
                  f"  peak RSS {result['peak_rss_mb']:6.0f} MB ({result['requests']} requests)")
    print(f"baseline        import {results['baseline']['import_s']:.2f} s"
          f"  peak RSS {results['baseline']['peak_rss_mb']:.0f} MB")
    out = ROOT / "benchmarks" / "results" / "trace_plan.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
