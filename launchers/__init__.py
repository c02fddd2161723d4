"""Starting real inference servers: vLLM in continuous or forced static-batching mode.

The vLLM scheduler plugins (`static_scheduler`, `step_recorder`) are not re-exported: they
import vLLM, and the engine loads them by dotted path (`--scheduler-cls`).
"""

from harness.systems import MODES, Mode
from launchers.layout import LAYOUTS, Layout, apply_layout, resolve_layout
from launchers.models import PROFILES, ModelProfile, ResolvedModel, prepare_profile, resolve_model
from launchers.process import group_members, stop_group
from launchers.server import ServerHandle, ServerInfo, VllmBuild, build_command, start
from launchers.spec import Endpoints, ServerConfig, ServerSpec

__all__ = [
    "LAYOUTS",
    "MODES",
    "PROFILES",
    "Endpoints",
    "Layout",
    "Mode",
    "ModelProfile",
    "ResolvedModel",
    "ServerConfig",
    "ServerHandle",
    "ServerInfo",
    "ServerSpec",
    "VllmBuild",
    "apply_layout",
    "build_command",
    "group_members",
    "prepare_profile",
    "resolve_layout",
    "resolve_model",
    "start",
    "stop_group",
]
