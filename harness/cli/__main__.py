"""`python -m harness.cli` runs the batchbench command line."""

import sys

from harness.cli import main

sys.exit(main())
