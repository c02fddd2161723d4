"""The servers a sweep command runs on: endpoints given on the command line, the others launched."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.server_options import server_spec
from harness.systems import HF_MODES, HfMode, Mode
from launchers import start

if TYPE_CHECKING:
    from harness.sweep import SweepTarget


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """--endpoint, --static-endpoint and --tokenizer: servers already running instead of launched ones."""
    parser.add_argument("--endpoint", help="an already running continuous server (skips launching it)")
    parser.add_argument("--static-endpoint", help="an already running static-batching server")
    parser.add_argument("--tokenizer", help="tokenizer directory when the endpoints' model is not local")


def sweep_targets(args: argparse.Namespace, out: Path, stack: contextlib.ExitStack,
                  transformers: bool = False) -> dict[Mode | HfMode, SweepTarget]:
    """The servers the sweep runs on: those given as endpoints, the others launched one after the other.

    One after the other, not side by side: each start is mostly imports and compilation,
    and both use every core, so two starts at once take as long as two in turn, and the
    second misses the compile cache the first fills (docs/validation/job-clock.md#server-start).
    Static is left out when only --endpoint is given. `transformers`: also launch
    `transformers serve` in its two modes. Every launched server stops when `stack` closes.
    """
    from harness.driver.endpoint import load_tokenizer, probe_endpoint
    from harness.sweep import SweepTarget

    wanted: dict[Mode, str | None] = {"continuous": args.endpoint}
    if not args.endpoint or args.static_endpoint:
        wanted["static"] = args.static_endpoint
    targets: dict[Mode | HfMode, SweepTarget] = {}
    for mode, endpoint in wanted.items():
        server_info, url = None, endpoint
        if endpoint is None:
            server = stack.enter_context(start(server_spec(args, mode), log_dir=out / "servers" / mode))
            url, server_info = server.base_url, asdict(server.info)
        assert url is not None, "the endpoint given, or the launched server's"
        # A launched server serves the model it was given; an endpoint must serve the one named.
        info = probe_endpoint(url, {}, args.model if endpoint else None)
        targets[mode] = SweepTarget(info, load_tokenizer(args.tokenizer, info), args.max_num_seqs, server_info)
    if transformers:
        from harness.sweep import transformers_target

        # One after the other, beside the vLLM servers (an idle server takes no CPU).
        config = server_spec(args, "continuous")
        for hf_mode in HF_MODES:
            targets[hf_mode] = transformers_target(stack, hf_mode, config, out / "servers" / hf_mode, args.tokenizer)
    return targets
