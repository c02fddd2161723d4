"""Write the packaged figures from the committed reference report: `python -m harness.reference`, in the checkout.

Run after replacing reports/reference-cpu; a test holds the two together.
"""

import json
import sys
from pathlib import Path

from harness.reference import PACKAGED, REFERENCE_SUMMARY, reference_of

summary = Path(REFERENCE_SUMMARY)
if not summary.is_file():
    sys.exit(f"{summary}: not found; run this in the checkout, after writing the reference report there")
packaged = Path(__file__).with_name(PACKAGED)
packaged.write_text(json.dumps(reference_of(json.loads(summary.read_text(encoding="utf-8"))), indent=2) + "\n",
                    encoding="utf-8")
print(packaged)
