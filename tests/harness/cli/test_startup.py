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


def patched_after(code: str) -> bool:
    """In a fresh interpreter: run `code`, then say whether gevent patched the process's sockets."""
    probe = f"{code}\nfrom gevent import monkey\nprint(monkey.is_module_patched('socket'))\n"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    return result.stdout.strip().splitlines()[-1] == "True"


def test_importing_the_cli_and_its_help_patch_nothing():
    assert not patched_after("import harness.cli, harness.cli.commands")
    assert not patched_after("from harness.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")


def test_offline_commands_patch_nothing_and_load_commands_patch_first(tmp_path):
    offline = f"from harness.cli import main\nmain(['analyze', '--out', {str(tmp_path / 'none')!r}])"
    assert not patched_after(offline)
    # Refused at once (no such workload), but the process was patched before anything was imported.
    load = f"from harness.cli import main\nmain(['run', '--workload', 'nope', '--endpoint', 'http://127.0.0.1:9'," \
           f" '--out', {str(tmp_path / 'o')!r}])"
    assert patched_after(load)
