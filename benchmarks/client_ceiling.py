"""The load client's own ceiling, measured on the zero-cost calibration endpoint (never a server).

Every phase starts the calibration endpoint (harness.calibration) in a process of its own
and drives it through a real client:
- endpoint: a trivial raw reader (asyncio, counts finished bodies, parses nothing): the
  endpoint's own ceiling, which must sit well above every client figure below;
- ours: `batchbench run` (the whole recording path: SSE parsing, per-token rows, journal,
  telemetry, tables) with 1 process, and with `--workers 2` (Locust's master and 2 workers);
- peer: `vllm bench serve`'s client (asyncio + aiohttp) on the same endpoint and shape;
- ttft: both clients one request at a time (low load): median TTFT;
- memory: 1,000 paced streams in flight per load process, in one process and with
  `--workers 2` (2,000 streams): the RSS and USS (psutil) of every Locust process of the
  run, sampled every 0.2 s, at the moment the endpoint counted the most streams in flight.

Throughput is streamed (generated) tokens per second over the run's makespan, for ours
from its run directory, for the peer from its own result file. Reps alternate who goes
first. Everything shares the machine's cores with the endpoint, as it would with a server.

    flock /tmp/batchbench-heavy.lock .venv/bin/python benchmarks/client_ceiling.py [--reps 3]

Writes benchmarks/results/client_ceiling.json and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import psutil

from harness.analysis.metrics import metrics_for_run
from harness.calibration import DEFAULT_MODEL
from harness.calibration.__main__ import READY_LINE
from harness.rundir.manifest import RunManifest
from harness.rundir.reader import load_run
from harness.rundir.records import MANIFEST_FILE
from harness.telemetry.metrics import parse_metrics
from launchers import resolve_model

# The peer is started as compare_vllm_bench starts it (run as a script, this file's
# directory is on the path; benchmarks are not a package, so mypy is not asked to follow).
VLLM_BENCH: str = importlib.import_module("compare_vllm_bench").VLLM_BENCH

ROOT = Path(__file__).resolve().parent.parent
# Throughput shape: many long streams at once, as a GPU server streams them; ~15 s a run at ~140k tok/s.
STREAMS, TOKENS, REQUESTS, PROMPT = 128, 1000, 2048, 16
# TTFT shape: one request at a time.
TTFT_REQUESTS, TTFT_TOKENS = 200, 32
# Memory shape: 1,000 streams in flight per load process, paced at 10 tokens/s each, 10 s long.
MEMORY_STREAMS, MEMORY_TOKENS, MEMORY_STEP_S = 1000, 100, 0.1



@dataclass
class Endpoint:
    """A running calibration endpoint: its URL and process."""

    base_url: str
    process: psutil.Process

    def cpu_s(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system


@contextlib.contextmanager
def endpoint(tokenizer: str, step_interval_s: float = 0.0) -> Iterator[Endpoint]:
    """Start the calibration endpoint on a free port; stop it on leaving."""
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.calibration", "--tokenizer", tokenizer,
         "--step-interval-s", str(step_interval_s)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(READY_LINE):
            raise SystemExit(f"calibration endpoint did not start: {line!r}")
        yield Endpoint(line.removeprefix(READY_LINE).strip(), psutil.Process(process.pid))
    finally:
        process.terminate()
        process.wait(10)


def workload(path: Path, name: str, requests: int, tokens: int, arrival: str) -> Path:
    path.write_text(
        f"name: {name}\nseed: 0\nnum_requests: {requests}\nendpoint: completions\n"
        f"prompt_tokens: {{kind: fixed, value: {PROMPT}}}\noutput_tokens: {{kind: fixed, value: {tokens}}}\n"
        f"arrival: {arrival}\n"
    )
    return path


def batchbench_run(base_url: str, spec: Path, out: Path, workers: int = 1) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness.cli", "run", "--workload", str(spec), "--endpoint", base_url,
            "--out", str(out), "--no-history", "--no-warmup", "--max-users", "4096"]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, what: str) -> str:
    """Wait for a client process; its stderr (where `run` says client-bound); SystemExit if it failed."""
    _, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{what} failed ({process.returncode}): {stderr[-2000:]}")
    return stderr


async def _raw_stream(host: str, port: int, body: bytes, deadline: float, done: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    request = (b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               b"content-length: %d\r\n\r\n%s" % (len(body), body))
    while time.monotonic() < deadline:
        writer.write(request)
        tail = b""
        while not tail.endswith(b"0\r\n\r\n"):
            data = await reader.read(1 << 20)
            if not data:
                raise ConnectionError("endpoint closed the connection")
            tail = (tail + data)[-5:]
        done[0] += 1
    writer.close()


def raw_reader(ep: Endpoint, seconds: float = 8.0) -> dict[str, float]:
    """The endpoint's ceiling: tokens/s into a reader that parses nothing."""
    host, port = ep.base_url.removeprefix("http://").split(":")
    body = json.dumps({"model": DEFAULT_MODEL, "prompt": "hello " * PROMPT, "max_tokens": TOKENS, "stream": True,
                       "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                       "return_token_ids": True}).encode()
    done = [0]

    async def main() -> None:
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(_raw_stream(host, int(port), body, deadline, done) for _ in range(STREAMS)))

    cpu, began = ep.cpu_s(), time.monotonic()
    asyncio.run(main())
    wall = time.monotonic() - began
    return {"tok_s": done[0] * TOKENS / wall, "endpoint_cpu_share": (ep.cpu_s() - cpu) / wall}


def ours(ep: Endpoint, scratch: Path, tag: str, workers: int = 1) -> dict:
    spec = workload(scratch / f"{tag}.yaml", "ceiling", REQUESTS, TOKENS, f"{{kind: closed, users: {STREAMS}}}")
    out = scratch / tag
    cpu = ep.cpu_s()
    stderr = finish(batchbench_run(ep.base_url, spec, out, workers), f"batchbench run {tag}")
    run = load_run(out)
    metrics = metrics_for_run(run)
    health = run.manifest.client_health
    return {
        "tok_s": metrics.generated_tok_s,
        "ok": metrics.ok,
        "makespan_s": metrics.makespan_s,
        "endpoint_cpu_share": (ep.cpu_s() - cpu) / metrics.makespan_s,
        "client_cpu_share": health.cpu_share if health else None,
        "client_loop_lag_p50_ms": health.loop_lag_p50_s * 1000 if health and health.loop_lag_p50_s else None,
        "said_client_bound": "client-bound" in stderr,
    }


def peer(ep: Endpoint, tokenizer: str, scratch: Path, tag: str, concurrency: int, requests: int, tokens: int) -> dict:
    name = f"{tag}.json"
    subprocess.run(
        [sys.executable, "-c", VLLM_BENCH, "--backend", "openai", "--base-url", ep.base_url,
         "--endpoint", "/v1/completions", "--model", DEFAULT_MODEL, "--tokenizer", tokenizer,
         "--dataset-name", "random", "--random-input-len", str(PROMPT), "--random-output-len", str(tokens),
         "--random-range-ratio", "0", "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
         "--request-rate", "inf", "--ignore-eos", "--save-result", "--result-dir", str(scratch),
         "--result-filename", name, "--disable-tqdm"],
        check=True, capture_output=True, text=True,
    )
    result = json.loads((scratch / name).read_text())
    return {"tok_s": result["output_throughput"], "ok": result["completed"],
            "median_ttft_ms": result["median_ttft_ms"]}


def ours_ttft(ep: Endpoint, scratch: Path, tag: str) -> dict:
    spec = workload(scratch / f"{tag}.yaml", "ttft", TTFT_REQUESTS, TTFT_TOKENS, "{kind: closed, users: 1}")
    finish(batchbench_run(ep.base_url, spec, scratch / tag), f"batchbench run {tag}")
    metrics = metrics_for_run(load_run(scratch / tag))
    return {"median_ttft_ms": metrics.ttft_s.p50 * 1000, "ok": metrics.ok}


def memory(ep: Endpoint, scratch: Path, workers: int) -> dict:
    """RSS and USS of each Locust process of a run while the endpoint holds the most streams in flight.

    Each load process holds MEMORY_STREAMS; with `--workers N` the master holds none.
    """
    tag = f"memory{workers}"
    spec = workload(scratch / f"{tag}.yaml", "memory", MEMORY_STREAMS * workers, MEMORY_TOKENS, "{kind: burst}")
    process = batchbench_run(ep.base_url, spec, scratch / tag, workers)
    root = psutil.Process(process.pid)
    best: dict = {"in_flight": -1}
    peak_rss = 0.0
    with httpx.Client(base_url=ep.base_url, timeout=5) as poll:
        while process.poll() is None:
            try:
                processes = [root, *root.children(recursive=True)]
                role = {root.pid: "master" if workers > 1 else "single"}
                sizes = [(role.get(p.pid, "worker"), p.memory_full_info()) for p in processes]
            except psutil.NoSuchProcess:
                break
            in_flight = int(parse_metrics(poll.get("/metrics").text, 0.0).running)
            peak_rss = max(peak_rss, *(info.rss / 2**20 for _, info in sizes))
            if in_flight >= best["in_flight"]:
                best = {"in_flight": in_flight,
                        "processes": [{"role": name, "rss_mb": info.rss / 2**20, "uss_mb": info.uss / 2**20}
                                      for name, info in sizes]}
            time.sleep(0.2)
    finish(process, f"batchbench run {tag}")
    manifest = RunManifest.model_validate_json((scratch / tag / MANIFEST_FILE).read_text())
    return best | {"workers": workers, "peak_rss_mb": peak_rss, "ok": manifest.counts.ok}


def summarise(values: list[float]) -> dict[str, float]:
    return {"median": float(np.median(values)), "min": float(min(values)), "max": float(max(values))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    tokenizer = str(resolve_model("tiny").path)
    results: dict[str, list[dict]] = {"endpoint": [], "ours_1": [], "ours_2": [], "peer": [],
                                      "ttft_ours": [], "ttft_peer": []}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        with endpoint(tokenizer) as ep:
            for rep in range(args.reps):
                results["endpoint"].append(raw_reader(ep))
                print(f"rep {rep} endpoint: {results['endpoint'][-1]}", flush=True)
                clients = [("ours_1", lambda r: ours(ep, scratch, f"ours1-{r}")),
                           ("ours_2", lambda r: ours(ep, scratch, f"ours2-{r}", workers=2)),
                           ("peer", lambda r: peer(ep, tokenizer, scratch, f"peer-{r}", STREAMS, REQUESTS, TOKENS))]
                for name, measure in clients if rep % 2 == 0 else clients[::-1]:
                    results[name].append(measure(rep))
                    print(f"rep {rep} {name}: {results[name][-1]}", flush=True)
                for name, measure in [("ttft_ours", lambda r: ours_ttft(ep, scratch, f"ttft-{r}")),
                                      ("ttft_peer", lambda r: peer(ep, tokenizer, scratch, f"ttftpeer-{r}", 1,
                                                                   TTFT_REQUESTS, TTFT_TOKENS))]:
                    results[name].append(measure(rep))
                    print(f"rep {rep} {name}: {results[name][-1]}", flush=True)
        with endpoint(tokenizer, MEMORY_STEP_S) as ep:
            mem = [memory(ep, scratch, workers) for workers in (1, 2)]
            print(f"memory: {mem}", flush=True)
    summary = {
        "endpoint_tok_s": summarise([r["tok_s"] for r in results["endpoint"]]),
        "ours_1_process_tok_s": summarise([r["tok_s"] for r in results["ours_1"]]),
        "ours_2_processes_tok_s": summarise([r["tok_s"] for r in results["ours_2"]]),
        "peer_tok_s": summarise([r["tok_s"] for r in results["peer"]]),
        "ttft_ours_ms": summarise([r["median_ttft_ms"] for r in results["ttft_ours"]]),
        "ttft_peer_ms": summarise([r["median_ttft_ms"] for r in results["ttft_peer"]]),
        "memory_at_1000_streams_per_process": mem,
    }
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "host_cores": psutil.cpu_count(),
              "shape": {"streams": STREAMS, "tokens": TOKENS, "requests": REQUESTS, "prompt_tokens": PROMPT},
              "summary": summary, "runs": results}
    out = ROOT / "benchmarks" / "results" / "client_ceiling.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
