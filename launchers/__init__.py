"""Starting real inference servers: vLLM in continuous or forced static-batching mode."""

from launchers.models import PROFILES, ModelProfile, ResolvedModel, prepare_profile, resolve_model
from launchers.server import MODES, Mode, ServerHandle, ServerInfo, ServerSpec, build_command, start

__all__ = [
    "MODES",
    "Mode",
    "PROFILES",
    "ModelProfile",
    "ResolvedModel",
    "ServerHandle",
    "ServerInfo",
    "ServerSpec",
    "build_command",
    "prepare_profile",
    "resolve_model",
    "start",
]
