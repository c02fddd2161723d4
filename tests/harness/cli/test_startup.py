"""`batchbench` answers --help and refuses bad input without loading the heavy libraries.

Importing pandas, SciPy, Locust and the rest takes seconds on two cores; a command pays
for them only once its input has been checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

# pyarrow is not among them: the record schemas need only its core, ~20 ms.
HEAVY = ("pandas", "scipy", "locust", "matplotlib", "torch", "vllm", "transformers")
BAD_WORKLOAD = """\
name: bad
seed: 1
num_requests: -4
prompt_tokens: {kind: fixed, value: 16}
output_tokens: {kind: fixed, value: 8}
arrival: {kind: burst}
"""


def heavy_loaded_by(argv: list[str] | None) -> tuple[int | None, list[str]]:
    """In a fresh interpreter: import the CLI, run `argv` through it (None: only import), and list what it loaded."""
    code = (
        "import json, sys\n"
        "from harness.cli import main\n"
        f"code = None if {argv!r} is None else main({argv!r})\n"
        f"print(json.dumps([code, [name for name in {HEAVY!r} if name in sys.modules]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    exit_code, loaded = json.loads(result.stdout.strip().splitlines()[-1])
    return exit_code, loaded


def test_importing_the_cli_loads_no_heavy_library():
    assert heavy_loaded_by(None) == (None, [])


def test_a_bad_workload_is_refused_before_any_heavy_library_loads(tmp_path):
    workload = tmp_path / "bad.yaml"
    workload.write_text(BAD_WORKLOAD)
    argv = ["run", "--workload", str(workload), "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "o")]
    assert heavy_loaded_by(argv) == (2, [])
