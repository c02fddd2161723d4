"""A checked field the command does not define is an error, not a silent skip."""

from __future__ import annotations

import subprocess
import sys

# Run in a child: importing harness.cli gevent-patches the process it runs in.
MISSPELLED = """
import sys
from pydantic import BaseModel
from harness.cli import main, options

class Misspelled(BaseModel):
    max_num_seq: int

options.OPTIONS["serve"] = (Misspelled,)
sys.exit(main(["serve", "--mode", "static"]))
"""


def test_a_misspelled_field_is_one_line_and_exit_2():
    result = subprocess.run([sys.executable, "-c", MISSPELLED], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == "batchbench: error: serve: Misspelled.max_num_seq has no --max-num-seq option to check\n"
