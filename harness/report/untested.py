"""What every report says of runs on a vLLM outside the tested releases (launchers.engine.vllm_releases).

Such a server ran only because --allow-untested-vllm said so; its launcher recorded the
marking ("UNTESTED VLLM 0.35.0 (...)", harness.rundir.manifest.untested_vllm). The reports
(reproduce and analyze, the rate sweep, the nightly trend) put it in the title and right
under it, beside the headline, and summary.json keeps it as `untested_vllm`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.document import Block, Paragraph

UNTESTED_TITLE = "UNTESTED VLLM"


def untested_title(title: str, untested: Sequence[str]) -> str:
    """`title`, with UNTESTED VLLM first when a server ran a vLLM outside the tested releases."""
    return f"{UNTESTED_TITLE}. {title}" if untested else title


def untested_vllm_blocks(untested: Sequence[str]) -> list[Block]:
    """Say first, beside the headline, when a server ran a vLLM outside the tested releases."""
    if not untested:
        return []
    return [Paragraph(
        f"**{'; '.join(untested)}: run with --allow-untested-vllm. Static mode and the step log live in vLLM's"
        " scheduler internals and were not tested on this release: the mode check, occupancy, admissions, the"
        " ratios at one machine speed and the verdicts below rest on them.**"
    )]
