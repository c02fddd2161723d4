"""Synthetic run directories -> load_run -> metrics -> gap table -> the written report."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.analysis.gap import GapEntry, gap_table, predict_for_run
from harness.analysis.metrics import metrics_for_run
from harness.errors import UsageError
from harness.paper.simulate import InterpolatedStepCost, simulate
from harness.report import ReportRun, write_report
from harness.report.document import to_markdown
from harness.report.gpu import gpu_section
from harness.rundir.manifest import GpuTelemetry, HostInfo, RunCounts, RunManifest
from harness.rundir.reader import load_run
from harness.rundir.records import RECORD_SCHEMA, TELEMETRY_SCHEMA, TOKEN_SCHEMA
from harness.telemetry.gpu import GpuSample, write_gpu_table

T0 = 1000.0
PROMPT = 6
STEP_S = 0.01  # every decode step 10 ms whatever the batch, so static and naive tie
STEPS = InterpolatedStepCost.from_points({1: STEP_S})
HOST = HostInfo(hostname="bench-1", cpu="Test CPU", cores=2, memory_gib=8.0, python="3.12", platform="Linux")


def write_run(root, name, system, workload, outputs, B, step_cost=STEPS):
    """A finished run dir whose timings follow the simulated schedule exactly.

    Token k of request i arrives at the end of step admit_i + k; every request is sent
    at T0; telemetry polls once per step with the step's active count.
    """
    schedule = simulate(system, np.array(outputs), B, step_cost)
    step_end = T0 + np.cumsum(schedule.step_duration_s)
    records, tokens = [], []
    for i, planned in enumerate(outputs):
        steps = range(schedule.admit_step[i], schedule.end_step[i])
        times = [float(step_end[s]) for s in steps]
        tokens += [{"request_id": i, "token_index": k, "t_s": t} for k, t in enumerate(times)]
        records.append({
            "request_id": i, "worker": "w:1", "planned_prompt_tokens": PROMPT, "planned_output_tokens": planned,
            "requested_output_tokens": len(times), "wave": -1, "scheduled_s": T0, "sent_s": T0, "lateness_s": 0.0,
            "first_token_s": times[0], "end_s": times[-1], "prompt_tokens": PROMPT, "completion_tokens": len(times),
            "status": 200, "error": "", "ok": True, "length_mismatch": False,
        })
    polls = [
        {"t": float(t), "running": float(a), "waiting": 0.0, "kv_cache_usage": 0.0, "generation_tokens_total": 0.0,
         "prompt_tokens_total": 0.0, "preemptions_total": 0.0}
        for t, a in zip([T0, *step_end[:-1]], schedule.step_active, strict=True)
    ]
    run_dir = root / name
    run_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(records, schema=RECORD_SCHEMA), run_dir / "records.parquet")
    pq.write_table(pa.Table.from_pylist(tokens, schema=TOKEN_SCHEMA), run_dir / "tokens.parquet")
    pq.write_table(pa.Table.from_pylist(polls, schema=TELEMETRY_SCHEMA), run_dir / "telemetry.parquet")
    plan = {"requests": [{"index": i, "prompt_tokens": PROMPT, "output_tokens": n, "arrival_s": 0.0}
                         for i, n in enumerate(outputs)]}
    (run_dir / "plan.json").write_text(json.dumps(plan))
    manifest = RunManifest(
        run_id=name, system=system, workload=workload, plan_sha256="0" * 64, batch_size=B,
        endpoint="http://127.0.0.1:8000", model="tiny-llama",
        server={"vllm_version": "0.32.0", "mode": "static" if system == "static" else "continuous",
                "batch_wait_s": 1.0},
        harness_version="0.1.0", git_sha="abc123", locust_version="2.47.0", host=HOST, telemetry_interval_s=STEP_S,
        started_at=T0, ended_at=float(step_end[-1]), counts=RunCounts(planned=len(outputs), sent=len(outputs),
                                                                      ok=len(outputs)),
        complete=True,
    )
    (run_dir / "manifest.json").write_text(manifest.model_dump_json())
    return run_dir


def cap_workload(cap):
    return {"name": f"tiny-cap{cap}", "seed": 0, "num_requests": 4, "prompt_tokens": {"kind": "fixed", "value": PROMPT},
            "output_tokens": {"kind": "exponential", "mean": 128, "cap": cap}, "arrival": {"kind": "burst"},
            "slo": {"ttft_ms": 50}}


SEED_WORKLOAD = {"name": "seed", "seed": 0, "num_requests": 4, "prompt_tokens": {"kind": "fixed", "value": PROMPT},
                 "output_tokens": {"kind": "choice", "values": [100, 200, 300, 1000]}, "arrival": {"kind": "burst"}}
# cap 4, B=2: static/naive run [1,4] then [2,4]: 8 steps; continuous r0 -> r2 -> r3 beside r1: 7 steps.
# cap 8, B=2: static/naive [2,8] then [8,2]: 16 steps; continuous: 10 steps.
OUTPUTS = {4: [1, 4, 2, 4], 8: [2, 8, 8, 2]}
STEP_COST = {
    "server": "continuous server pid 1 started t0", "runs": 3, "steps": 1200, "r_squared": 0.95,
    "residual_std_s": 0.001, "mean_step_s": 0.012, "overhead_s": 0.010, "per_sequence_s": 0.0005,
    "per_prefill_token_s": 5e-5, "per_context_token_s": 0.0, "per_prefill_pair_s": 0.0, "wave_gap_s": 0.03,
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    dirs = [write_run(root, f"{system}-cap{cap}", system, cap_workload(cap), outputs, 2)
            for cap, outputs in OUTPUTS.items() for system in ("continuous", "static", "naive")]
    dirs.append(write_run(root, "static-seed", "static", SEED_WORKLOAD, [100, 200, 300, 1000], 4,
                          InterpolatedStepCost.from_points({1: 0.001})))
    runs = []
    for path in dirs:
        data = load_run(path)
        step_cost = STEPS if "cap" in path.name else InterpolatedStepCost.from_points({1: 0.001})
        predicted = predict_for_run(data.plan["requests"], data.manifest.batch_size, data.manifest.system, step_cost)
        runs.append(ReportRun(GapEntry.from_run(data, metrics_for_run(data), predicted), data))
    table = gap_table([run.entry for run in runs])
    extras = {"caveats": ["Tiny synthetic runs."], "step_costs": [STEP_COST]}
    paths = write_report(runs, table, tmp_path_factory.mktemp("report"), extras)
    return runs, table, paths


def test_gap_table_from_run_dirs_matches_hand_numbers(sweep):
    _, table, _ = sweep
    assert table["level"].tolist() == [4, 8, "seed"]
    # cap 4: (24 prompt + 11 useful) tokens over 0.07 s (continuous) and 0.08 s (static, naive).
    assert table.loc[0, "continuous_total_tok_s"] == pytest.approx(35 / 0.07)
    assert table.loc[0, "static_total_tok_s"] == pytest.approx(35 / 0.08)
    assert table.loc[0, "naive_total_tok_s"] == pytest.approx(35 / 0.08)
    assert table.loc[0, "naive_output_tok_s"] == pytest.approx(11 / 0.08)
    # cap 8: 44 tokens over 0.10 s and 0.16 s.
    assert table.loc[1, "continuous/static"] == pytest.approx(1.6)
    assert table.loc[1, "static/naive"] == pytest.approx(1.0)
    # Timings replay the schedule the prediction simulates, so they agree.
    assert table.loc[1, "continuous_vs_predicted"] == pytest.approx(0.0, abs=1e-9)


def test_report_files_and_self_contained_html(sweep):
    _, _, paths = sweep
    for path in (paths.markdown, paths.html, paths.summary, *paths.images):
        assert path.is_file()
    assert sorted(p.name for p in paths.images) == ["latency.png", "occupancy.png", "seed-slots.png", "throughput.png"]
    page = paths.html.read_text()
    assert page.count('<table id="gap-table"') == 1
    sources = re.findall(r'<img src="([^"]*)"', page)
    assert len(sources) == 4
    for source in sources:
        assert source.startswith("data:image/png;base64,")
        assert base64.b64decode(source.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    # Nothing else to fetch: the only src/href attributes are the data URIs.
    assert len(re.findall(r"\b(?:src|href)=", page)) == 4
    markdown = paths.markdown.read_text()
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown):
        assert (paths.markdown.parent / link).is_file()


def test_report_sections_carry_the_numbers(sweep):
    _, _, paths = sweep
    page = paths.html.read_text()
    # The gap table's cap-8 row: continuous 440 tok/s against static 275.
    assert "<td>8</td><td>tiny-cap8</td><td>440</td><td>200</td><td>440</td>" in page
    assert "1.60x" in page
    # Published figures beside computed ones (physics and simulate).
    assert "~4.8 ms</td><td>4.79 ms" in page
    assert "~53 GB</td><td>52.9 GB" in page
    assert "40%</td><td>40% (simulated)" in page
    # The static seed run: (99+199+299+999) slot-seconds of 4 x 1.0 is 40% useful.
    assert "40% of slot-time useful (static-seed, B=4)" in page
    # No model cards of GPU setups in a report of CPU runs.
    assert "OPT-13B on A100 40GB" not in page and "Model cards" not in page
    assert "Tiny synthetic runs." in page
    # The step cost: 10 ms + 0.5 ms per sequence, so 16 sequences cost 18 / 10.5 = 1.7x one.
    assert "costs 1.7x one of 1" in page
    assert "Source: fitted on the engines" in page
    assert "<td>continuous server pid 1 started t0</td><td>3</td><td>1,200</td><td>10.0</td><td>500.0</td>" in page


def test_without_gpu_telemetry_the_gpu_section_is_one_line(sweep):
    _, _, paths = sweep
    markdown = paths.markdown.read_text()
    section = markdown.split("## GPU energy and memory\n\n", 1)[1].split("\n\n", 1)[0]
    assert section == "No GPU telemetry: recorded before batchbench read GPUs."


def test_no_paper_prediction_for_runs_of_a_cpu_model(sweep):
    _, _, paths = sweep
    assert "Predicted on paper" not in paths.markdown.read_text()


def test_summary_json(sweep):
    runs, _, paths = sweep
    summary = json.loads(paths.summary.read_text())
    assert summary["metadata"]["hosts"][0]["hostname"] == "bench-1"
    assert summary["metadata"]["vllm_versions"] == ["0.32.0"]
    assert summary["metadata"]["git_shas"] == ["abc123"]
    assert summary["metadata"]["runs"] == len(runs) == 7
    rows = {row["level"]: row for row in summary["gap_table"]}
    assert rows[8]["continuous_total_tok_s"] == pytest.approx(440.0)
    # No static run at "seed" besides the seed run itself: ratios there are null.
    assert rows["seed"]["continuous/static"] is None
    seed = next(run for run in summary["runs"] if run["run_id"] == "static-seed")
    assert seed["metrics"]["useful_slot_time_fraction"] == pytest.approx(1596 / 4000)
    assert seed["predicted"]["useful_fraction"] == pytest.approx(0.4)
    assert "PASS: each system within 10% of its prediction (7 runs; worst" in " ".join(summary["acceptance"])
    assert summary["step_models"] == [STEP_COST]
    # Runs recorded before GPU telemetry: no GPU figures, and the one line saying why.
    assert seed["metrics"]["gpu"] is None
    assert seed["gpu_telemetry"] == "no GPU telemetry: recorded before batchbench read GPUs"


def test_bad_extras_and_unknown_occupancy_level_are_usage_errors(sweep, tmp_path):
    runs, table, _ = sweep
    with pytest.raises(UsageError, match="report extras: colour"):
        write_report(runs, table, tmp_path, {"colour": "red"})
    with pytest.raises(UsageError, match="occupancy_level"):
        write_report(runs, table, tmp_path, {"occupancy_level": 512})


# --- load_run refusals -----------------------------------------------------------------


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path, "one", "continuous", cap_workload(4), OUTPUTS[4], 2)


def test_load_run_reads_every_table(run_dir):
    run = load_run(run_dir)
    assert (len(run.records), len(run.tokens)) == (4, 11)
    assert run.plan["requests"][1]["output_tokens"] == 4


def test_load_run_refuses_a_dir_without_manifest(tmp_path):
    with pytest.raises(UsageError, match=f"{re.escape(str(tmp_path))}: not a run directory"):
        load_run(tmp_path)


def test_load_run_refuses_an_unfinished_run(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "complete": False}))
    with pytest.raises(UsageError, match=f"{re.escape(str(run_dir))}: run did not finish"):
        load_run(run_dir)


def test_load_run_refuses_a_missing_table(run_dir):
    (run_dir / "tokens.parquet").unlink()
    with pytest.raises(UsageError, match="tokens.parquet: missing"):
        load_run(run_dir)


def test_load_run_refuses_a_table_without_its_columns(run_dir):
    pq.write_table(pa.table({"t": [1.0]}), run_dir / "telemetry.parquet")
    with pytest.raises(UsageError, match="telemetry.parquet: missing columns running, waiting"):
        load_run(run_dir)


def test_load_run_refuses_a_bad_manifest(run_dir):
    (run_dir / "manifest.json").write_text('{"run_id": "one"}')
    with pytest.raises(UsageError, match="manifest.json: .*system"):
        load_run(run_dir)


# --- run directories that do not answer for their plan, through `batchbench analyze` --------


def analyze(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "analyze", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def rewrite_records(run_dir, change):
    table = pq.read_table(run_dir / "records.parquet").to_pylist()
    pq.write_table(pa.Table.from_pylist(change(table), schema=RECORD_SCHEMA), run_dir / "records.parquet")


def fail_second(rows):
    rows[1].update(ok=False, error_kind="stall", error="no bytes for 6 s after 1 tokens")
    return rows


def edit_manifest(run_dir, **changes):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, **changes}))


BROKEN_RUNS = {
    "a row missing": (
        lambda d: rewrite_records(d, lambda rows: rows[:2] + rows[3:]),
        "1 planned requests have no row (ids 2)",
    ),
    "a row twice": (
        lambda d: rewrite_records(d, lambda rows: [*rows, rows[0]]),
        "1 requests have more than one row (ids 0)",
    ),
    "a row not planned": (
        lambda d: rewrite_records(d, lambda rows: [*rows, {**rows[0], "request_id": 9}]),
        "1 rows are not in the plan's owed requests (ids 9)",
    ),
    "a failed request": (lambda d: rewrite_records(d, fail_second), "1 of 4 requests failed (1 stall)"),
    "interrupted": (lambda d: edit_manifest(d, complete=False), "run did not finish"),
    "no plan": (lambda d: (d / "plan.json").unlink(), "no usable plan.json"),
    "plan not an object": (lambda d: (d / "plan.json").write_text("[1, 2]"), "plan.json: expected a JSON object"),
    "manifest not json": (lambda d: (d / "manifest.json").write_text("{oops"), "manifest.json: Invalid JSON"),
    "records not parquet": (
        lambda d: (d / "records.parquet").write_bytes(b"PAR1 not really"),
        "records.parquet: cannot read parquet",
    ),
    "records without a column": (
        lambda d: pq.write_table(pa.table({"request_id": [0]}), d / "records.parquet"),
        "records.parquet: missing columns",
    ),
}


@pytest.mark.parametrize("name", BROKEN_RUNS)
def test_analyze_refuses_a_run_that_does_not_answer_for_its_plan(run_dir, tmp_path, name):
    breakage, fragment = BROKEN_RUNS[name]
    breakage(run_dir)
    result = analyze(run_dir, "--out", tmp_path / "report")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "report").exists()


def test_allow_partial_reports_such_a_run_and_says_so_first(run_dir, tmp_path):
    rewrite_records(run_dir, fail_second)
    result = analyze(run_dir, "--out", tmp_path / "report", "--allow-partial")
    assert result.returncode == 0, result.stderr
    first = (tmp_path / "report" / "report.md").read_text().splitlines()[0]
    assert first.startswith("# PARTIAL")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["partial"] == ["one: 1 of 4 requests failed (1 stall)"]


def test_analyze_will_not_write_its_report_into_a_run(run_dir):
    result = analyze(run_dir, "--out", run_dir)
    assert result.returncode == 2 and "holds something other than an earlier report" in result.stderr


# The report as a person sees it: report.html in headless Chromium (the `chromium`
# fixture, tests/conftest.py, installs it in the set-up if missing).
@pytest.mark.browser
def test_report_html_in_headless_chromium_loads_every_image_and_the_gap_table(sweep, probe_in_chromium):
    _, _, paths = sweep
    seen = probe_in_chromium(paths.html, "{images: document.images.length, loaded: [...document.images].filter("
                             "i => i.complete && i.naturalWidth > 0).length,"
                             " gapRows: document.querySelectorAll('#gap-table tr').length}")
    assert seen["images"] == 4 and seen["loaded"] == 4, seen
    assert seen["gapRows"] >= 4, seen


# Above the fold: what a reader sees first in a 1280 x 900 window must be the answer. The
# probe reports where the headline table ends and how tall the viewport is (Chromium
# keeps ~140 px of the window for its own frame, as a desktop browser does).
FOLD_PROBE = ("{found: document.getElementById('headline') !== null, innerHeight: window.innerHeight,"
              " bottom: document.getElementById('headline')?.getBoundingClientRect().bottom ?? null,"
              " firstTable: document.querySelector('table').id}")
WINDOW_HEIGHT = 900


@pytest.fixture(scope="module")
def assembled(tmp_path_factory):
    """The report `reproduce` writes (headline first), from three repetitions of each cell."""
    from harness.report.assemble import assemble_report

    root = tmp_path_factory.mktemp("repeated")
    dirs = [write_run(root, f"{system}-cap{cap}-r{rep}", system, cap_workload(cap), outputs, 2)
            for rep in (1, 2, 3) for cap, outputs in OUTPUTS.items() for system in ("continuous", "static", "naive")]
    return assemble_report(dirs, tmp_path_factory.mktemp("assembled"), caveats=["Tiny synthetic runs."])


def test_the_setup_comes_before_the_details(assembled):
    markdown = assembled.paths.markdown.read_text()
    lead = markdown.split("## ", 1)[0]
    for line in ("- model: tiny-llama", "- B: 2 for every system (admission is the only difference)",
                 "- static: a batch forms when B requests wait or 1 s after the oldest waiting one arrived",
                 "- repetitions: 3 of every system at every level"):
        assert line in lead, line
    assert "- plans: all sent at once" in lead and "cap 4: 4 requests, mean output" in lead


@pytest.mark.browser
def test_the_headline_is_the_first_table_and_sits_above_the_fold(assembled, tmp_path, headless, probe_in_chromium):
    import subprocess

    from matplotlib.image import imread

    seen = probe_in_chromium(assembled.paths.html, FOLD_PROBE)
    assert seen["found"] and seen["firstTable"] == "headline", seen
    assert 700 <= seen["innerHeight"] <= WINDOW_HEIGHT, seen
    assert 0 < seen["bottom"] <= seen["innerHeight"], seen
    # And the picture a reader gets: a screenshot of the top of the page, kept beside the test's files.
    shot = tmp_path / "top.png"
    result = subprocess.run([*headless, f"--screenshot={shot}", assembled.paths.html.as_uri()],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    height, width = imread(shot).shape[:2]
    assert width == 1280 and height >= seen["innerHeight"], (width, height)


def test_the_headline_table_sits_beside_its_plot(assembled):
    page = assembled.paths.html.read_text()
    side = page.split('<div class="side">', 1)[1]
    assert side.index('<table id="headline"') < side.index('<figure id="figure-headline">') < side.index("</figure>")
    assert page.index('<div class="side">') < page.index("<h2>")
    assert (assembled.paths.markdown.parent / "images" / "headline.png").is_file()


def test_unstable_levels_get_one_short_line_and_the_full_reason_further_down(tmp_path):
    from harness.report.assemble import assemble_report

    dirs = [write_run(tmp_path / "runs", f"{system}-cap4-r{rep}", system, cap_workload(4), OUTPUTS[4], 2)
            for rep in (1, 2) for system in ("continuous", "static", "naive")]
    markdown = assemble_report(dirs, tmp_path / "report").paths.markdown.read_text()
    # The ratios' own checks; the runs (synthetic runs last well under 20 s) are warnings, which precision bounds.
    lead = markdown.split("## ", 1)[0]
    assert ("- cap 4, UNSTABLE: continuous/static 2 repetition(s), 3 needed; continuous/naive 2 repetition(s),"
            " 3 needed\n") in lead
    assert "- cap 4, warning: continuous: 2 of 2 runs with a warning (run lasted" in lead
    assert "UNSTABLE: 2 repetition(s), fewer than 3: no interval" in markdown.split("## Every cell, repeated", 1)[1]


def test_a_paired_headline_and_the_gap_table_name_their_estimators(tmp_path):
    from harness.report.assemble import assemble_report

    dirs = []
    for rep in (1, 2, 3):
        for system in ("continuous", "static", "naive"):
            run_dir = write_run(tmp_path / "runs", f"{system}-cap4-r{rep}", system, cap_workload(4), OUTPUTS[4], 2)
            # Repetitions in rounds, one after another: the headline pairs them.
            edit_manifest(run_dir, started_at=T0 + 100 * rep)
            dirs.append(run_dir)
    markdown = assemble_report(dirs, tmp_path / "report").paths.markdown.read_text()
    lead = markdown.split("## ", 1)[0]
    assert "the geometric mean of 3 repetitions' ratios, the systems back to back in each" in lead
    gap = markdown.split("## Throughput gap", 1)[1].split("##", 1)[0]
    assert ("The ratio columns are the headline's (the geometric mean over repetitions of each repetition's ratio),"
            " so they need not equal the quotient of the median runs' figures beside them.") in gap


def test_an_unpaired_headline_leaves_the_gap_table_unqualified(assembled):
    gap = assembled.paths.markdown.read_text().split("## Throughput gap", 1)[1].split("##", 1)[0]
    assert "ratio of medians" not in gap


# The first screen at 1280 px: the headline plot sits beside the headline table, inside the
# window, and the page does not scroll sideways (wide tables scroll in their own box).
FIRST_SCREEN_PROBE = (
    "{scrollWidth: document.scrollingElement.scrollWidth, clientWidth: document.scrollingElement.clientWidth,"
    " innerHeight: window.innerHeight,"
    " tableRight: document.getElementById('headline').getBoundingClientRect().right,"
    " plot: (() => { const box = document.getElementById('figure-headline')?.getBoundingClientRect();"
    " return box ? {top: box.top, bottom: box.bottom, left: box.left} : null; })()}"
)


@pytest.mark.browser
def test_the_first_screen_shows_the_headline_plot_and_nothing_scrolls_sideways(assembled, probe_in_chromium):
    seen = probe_in_chromium(assembled.paths.html, FIRST_SCREEN_PROBE)
    assert seen["clientWidth"] == 1280 and seen["scrollWidth"] <= seen["clientWidth"], seen
    plot = seen["plot"]
    assert plot is not None and plot["top"] >= 0 and plot["bottom"] <= seen["innerHeight"], seen
    assert plot["left"] >= seen["tableRight"], seen


# --- GPU telemetry ----------------------------------------------------------------------

GIB = 2**30


def add_gpu_telemetry(run_dir, telemetry: GpuTelemetry, samples=()):
    """What the runner adds for GPU telemetry: gpu.parquet when GPUs were read, the manifest's line."""
    if telemetry.devices:
        write_gpu_table(run_dir, list(samples))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "gpu_telemetry": telemetry.model_dump()}))


def report_run(path):
    data = load_run(path)
    return ReportRun(GapEntry.from_run(data, metrics_for_run(data)), data)


def test_a_gpu_run_reports_joules_per_generated_token_and_memory_headroom(tmp_path):
    # The run: every request sent at 1000.0 s, the last token at 1000.07 s, 11 tokens generated.
    gpu_run = write_run(tmp_path, "gpu-run", "continuous", cap_workload(4), OUTPUTS[4], 2)
    samples = [
        # The energy counter rises at 200 W; the power sensor's 210 W is not used when the counter is there.
        GpuSample(t=t, gpu=0, utilization=u, memory_used_bytes=used * GIB, memory_total_bytes=80 * GIB, power_w=210.0,
                  energy_j=5000.0 + 200.0 * (t - 999.9), latency_s=0.001, error="")
        for t, u, used in [(999.9, 0.0, 20), (1000.0, 0.6, 30), (1000.05, 0.8, 30), (1000.1, 0.0, 30)]
    ]
    add_gpu_telemetry(gpu_run, GpuTelemetry(note="GPU telemetry: 1 GPU (NVIDIA H100) read through NVML every 0.05 s",
                                            devices=["NVIDIA H100"], interval_s=0.05), samples)
    cpu_run = write_run(tmp_path, "cpu-run", "static", cap_workload(4), OUTPUTS[4], 2)
    add_gpu_telemetry(cpu_run, GpuTelemetry(note="no GPU telemetry: NVML sees no GPU on this machine"))
    runs = [report_run(gpu_run), report_run(cpu_run)]
    flat = runs[0].entry.metrics.to_flat_dict()
    assert flat["gpu.energy_j"] == pytest.approx(14.0) and flat["gpu.energy_source"] == "energy counter"
    assert flat["gpu.joules_per_generated_token"] == pytest.approx(14.0 / 11)
    assert runs[1].entry.metrics.gpu is None
    markdown = to_markdown(gpu_section(runs))
    assert "| gpu-run | continuous | 4 | 1 | 14.0 | energy counter | 1.27 | 200 | 70.0% | 30.0 | 80.0 | 50.0 | 0 |" \
        in markdown
    assert "- cpu-run: no GPU telemetry: NVML sees no GPU on this machine" in markdown


def test_without_gpu_samples_the_section_is_one_line_of_reasons(tmp_path):
    nvml_off = write_run(tmp_path, "a", "continuous", cap_workload(4), OUTPUTS[4], 2)
    add_gpu_telemetry(nvml_off, GpuTelemetry(note="no GPU telemetry: NVML did not start (Driver Not Loaded)"))
    before = write_run(tmp_path, "b", "static", cap_workload(4), OUTPUTS[4], 2)
    blocks = gpu_section([report_run(nvml_off), report_run(before)])
    assert to_markdown(blocks) == ("## GPU energy and memory\n\nNo GPU telemetry: NVML did not start (Driver Not"
                                   " Loaded); recorded before batchbench read GPUs.\n")


def test_load_run_refuses_a_gpu_run_without_its_gpu_table(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    telemetry = {"note": "GPU telemetry: 1 GPU", "devices": ["NVIDIA H100"], "interval_s": 0.25, "errors": 0}
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "gpu_telemetry": telemetry}))
    with pytest.raises(UsageError, match="gpu.parquet: missing"):
        load_run(run_dir)


def test_a_smoke_run_says_so_first_and_judges_no_stability(tmp_path):
    from harness.report.assemble import assemble_report

    dirs = [write_run(tmp_path / "runs", f"{system}-cap4", system, cap_workload(4), OUTPUTS[4], 2)
            for system in ("continuous", "static", "naive")]
    report = assemble_report(dirs, tmp_path / "report", smoke=True)
    lead = report.paths.markdown.read_text().split("## ", 1)[0]
    assert "**Smoke run, not a measurement:" in lead and "Stability is not judged in a smoke run." in lead
    assert "UNSTABLE" not in lead and "| not judged |" in lead
    assert "Not judged: a smoke run (--quick) is not a measurement" in report.paths.markdown.read_text()
    assert "is UNSTABLE (" not in report.paths.markdown.read_text()


def test_a_report_written_before_the_job_s_end_says_how_far_it_got(tmp_path):
    from harness.report.assemble import JobStage, assemble_report

    dirs = [write_run(tmp_path / "runs", f"{system}-cap4", system, cap_workload(4), OUTPUTS[4], 2)
            for system in ("continuous", "static", "naive")]
    stage = JobStage("PRELIMINARY", "1 of 3 repetitions; the next repetition rewrites this report")
    report = assemble_report(dirs, tmp_path / "report", stage=stage)
    markdown = report.paths.markdown.read_text()
    assert markdown.startswith("# PRELIMINARY: 1 of 3 repetitions; the next repetition rewrites this report.")
    assert "**PRELIMINARY: 1 of 3 repetitions" in markdown.split("## ", 1)[0]
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["stage"] == stage.line()
    # The final report, written over it, says nothing of a stage.
    assemble_report(dirs, tmp_path / "report")
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["stage"] is None
    assert "PRELIMINARY" not in report.paths.markdown.read_text()


def test_runs_on_an_untested_vllm_say_so_in_the_title_the_lead_and_summary_json(tmp_path):
    from harness.report.assemble import assemble_report

    marking = "UNTESTED VLLM 0.35.0 (0.35 is newer than the tested 0.30 to 0.34)"
    dirs = []
    for system in ("continuous", "static", "naive"):
        run_dir = write_run(tmp_path / "runs", f"{system}-cap4", system, cap_workload(4), OUTPUTS[4], 2)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        edit_manifest(run_dir, server={**manifest["server"], "vllm_version": "0.35.0", "vllm_untested": marking})
        dirs.append(run_dir)
    report = assemble_report(dirs, tmp_path / "report")
    markdown = report.paths.markdown.read_text()
    assert markdown.startswith("# UNTESTED VLLM. ")
    assert f"**{marking}: run with --allow-untested-vllm." in markdown.split("## ", 1)[0]
    assert json.loads(report.paths.summary.read_text())["untested_vllm"] == [marking]
    # A tested release's report says nothing of it.
    tested = assemble_report([write_run(tmp_path / "tested", f"{s}-cap4", s, cap_workload(4), OUTPUTS[4], 2)
                              for s in ("continuous", "static", "naive")], tmp_path / "tested-report")
    assert "UNTESTED" not in tested.paths.markdown.read_text()
    assert json.loads(tested.paths.summary.read_text())["untested_vllm"] == []


def reference_like(runs_summary):
    """A packaged reference for the CPU default setup (B=2 here), built as the package builds its own."""
    from harness.reference import reference_of

    return reference_of(runs_summary) | {"git_shas": ["f" * 40], "made": "2026-12-06"}


def default_setup_runs(root, requests=4):
    """Three repetitions of cap 4 on the reference's setup: model tiny, vLLM 0.32.0, B=2, launched."""
    dirs = []
    for rep in (1, 2, 3):
        for system in ("continuous", "static", "naive"):
            run_dir = write_run(root, f"{system}-cap4-r{rep}", system, cap_workload(4), OUTPUTS[4][:requests], 2)
            manifest = json.loads((run_dir / "manifest.json").read_text())
            edit_manifest(run_dir, started_at=T0 + 100 * rep, model="tiny",
                          server={**manifest["server"], "model": "tiny"})
            dirs.append(run_dir)
    return dirs


def test_a_report_on_the_reference_s_setup_sets_its_ratios_beside_the_reference_s_and_names_it(tmp_path,
                                                                                               monkeypatch):
    import harness.report.assemble as assemble

    dirs = default_setup_runs(tmp_path / "runs")
    first = assemble.assemble_report(dirs, tmp_path / "first")
    reference = reference_like(json.loads(first.paths.summary.read_text()))
    # The reference's static was slower: its continuous/static twice what these runs measure.
    for row in reference["headline"]:
        row["ratios"]["continuous/static"] *= 2
    monkeypatch.setattr(assemble, "packaged_reference", lambda: reference)
    report = assemble.assemble_report(dirs, tmp_path / "report")
    lead = report.paths.markdown.read_text().split("## ", 1)[0]
    ours = first.headline[0].ratios["continuous/static"].point
    assert ("Beside the committed reference (reports/reference-cpu, made by `./reproduce` on 2026-12-06 at git"
            " ffffffffff)") in lead
    assert "Both ran the same requests per workload." in lead
    assert f"| cap 4 | {ours:.2f}× | {2 * ours:.2f}× |" in lead
    entry = json.loads(report.paths.summary.read_text())["reference"]
    assert entry["compared"] is True and entry["levels"] == [4] and entry["git_shas"] == ["f" * 40]


def test_a_plan_of_another_size_is_named_beside_the_reference(tmp_path, monkeypatch):
    import harness.report.assemble as assemble

    reference = reference_like(json.loads(assemble.assemble_report(
        default_setup_runs(tmp_path / "runs"), tmp_path / "first").paths.summary.read_text()))
    monkeypatch.setattr(assemble, "packaged_reference", lambda: reference)
    report = assemble.assemble_report(default_setup_runs(tmp_path / "smaller", requests=3), tmp_path / "report")
    assert "The plans differ (tiny-cap4 3 (reference 4)); sizing keeps a plan's ratios within 2%" in (
        report.paths.markdown.read_text().split("## ", 1)[0])


def test_a_report_on_another_setup_says_in_one_line_why_it_is_not_compared(tmp_path, monkeypatch):
    import harness.report.assemble as assemble

    reference = reference_like(json.loads(assemble.assemble_report(
        default_setup_runs(tmp_path / "runs"), tmp_path / "first").paths.summary.read_text()))
    monkeypatch.setattr(assemble, "packaged_reference", lambda: reference)
    dirs = [write_run(tmp_path / "other", f"{s}-cap4", s, cap_workload(4), OUTPUTS[4], 2)
            for s in ("continuous", "static", "naive")]
    report = assemble.assemble_report(dirs, tmp_path / "report")
    lead = report.paths.markdown.read_text().split("## ", 1)[0]
    assert ("Not compared with the committed reference (reports/reference-cpu, made by `./reproduce` on 2026-12-06"
            " at git ffffffffff): it ran tiny at B=2 on vLLM 0.32.0, launched here; continuous-cap4, naive-cap4,"
            " static-cap4 did not.") in lead
    assert "| cap 4 |" not in lead.split("Not compared", 1)[1]
    assert json.loads(report.paths.summary.read_text())["reference"]["compared"] is False


def test_the_reference_s_own_runs_are_named_as_such_and_not_set_beside_themselves(tmp_path, monkeypatch):
    import harness.report.assemble as assemble
    from harness.reference import reference_of

    dirs = default_setup_runs(tmp_path / "runs")
    reference = reference_of(json.loads(assemble.assemble_report(dirs, tmp_path / "first").paths.summary.read_text()))
    monkeypatch.setattr(assemble, "packaged_reference", lambda: reference)
    report = assemble.assemble_report(dirs, tmp_path / "report")
    lead = report.paths.markdown.read_text().split("## ", 1)[0]
    assert ("These runs are the committed reference's (reports/reference-cpu, made by `./reproduce` on 1970-01-01"
            in lead)
    assert "Beside the committed reference" not in lead
    # Its summary.json still gives the same packaged figures: writing them again changes nothing.
    assert reference_of(json.loads(report.paths.summary.read_text())) == reference


def test_model_cards_of_the_published_gpu_setups_come_only_with_a_run_on_a_gpu(tmp_path):
    from harness.report.assemble import assemble_report

    dirs = [write_run(tmp_path / "runs", f"{system}-cap4", system, cap_workload(4), OUTPUTS[4], 2)
            for system in ("continuous", "static")]
    sample = GpuSample(t=1000.0, gpu=0, utilization=0.5, memory_used_bytes=GIB, memory_total_bytes=80 * GIB,
                       power_w=200.0, energy_j=1.0, latency_s=0.001, error="")
    add_gpu_telemetry(dirs[0], GpuTelemetry(note="NVML: 1 GPU", devices=["NVIDIA H100"], interval_s=0.5), [sample])
    markdown = assemble_report(dirs, tmp_path / "report").paths.markdown.read_text()
    assert "## Model cards" in markdown and "OPT-13B on A100 40GB" in markdown
