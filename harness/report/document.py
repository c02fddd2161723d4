"""The report as a list of blocks, and its two renderings: Markdown and standalone HTML.

Blocks carry already-formatted text; nothing here computes or formats numbers. The
Markdown links each figure to images/<name>.png beside it; the HTML embeds every
figure as a base64 data: URI, so the page needs no other file and no network.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass

IMAGES_DIR = "images"
# Markdown bold, the one inline markup the report's text uses.
_BOLD = re.compile(r"\*\*(.+?)\*\*")


@dataclass(frozen=True)
class Heading:
    """A section title; level 1 is the report's title."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """One paragraph of text."""

    text: str


@dataclass(frozen=True)
class Bullets:
    """A bulleted list."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """Cells are already formatted text; `numeric` right-aligns all but the first column."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    table_id: str | None = None
    numeric: bool = True


@dataclass(frozen=True)
class Image:
    """A figure: PNG bytes, written as images/<name>.png beside report.md."""

    name: str
    png: bytes
    caption: str


@dataclass(frozen=True)
class Stack:
    """Blocks kept together in one column of a SideBySide (HTML), in turn in Markdown."""

    blocks: tuple[Table | Bullets | Paragraph, ...]


@dataclass(frozen=True)
class SideBySide:
    """Two blocks side by side in HTML (wrapping under each other on a narrow page), in turn in Markdown."""

    left: Table | Image | Stack
    right: Table | Image


Block = Heading | Paragraph | Bullets | Table | Image | SideBySide


def flatten(blocks: Iterable[Block]) -> list[Block]:
    """`blocks` with each side-by-side pair replaced by its blocks in turn."""
    return [part for block in blocks
            for part in ((*_parts(block.left), block.right) if isinstance(block, SideBySide) else (block,))]


def _parts(block: Table | Image | Stack) -> tuple[Table | Image | Bullets | Paragraph, ...]:
    return block.blocks if isinstance(block, Stack) else (block,)


def to_markdown(blocks: Iterable[Block]) -> str:
    """Markdown of `blocks`; images link to images/<name>.png beside the file."""
    parts = []
    for block in blocks:
        if isinstance(block, SideBySide):
            parts.append(to_markdown((*_parts(block.left), block.right)).rstrip("\n"))
        elif isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table):
            lines = [_md_row(block.header), _md_row(["---"] * len(block.header))]
            lines += [_md_row(row) for row in block.rows]
            parts.append("\n".join(lines))
        else:
            parts.append(f"![{block.caption}]({IMAGES_DIR}/{block.name}.png)\n\n*{block.caption}*")
    return "\n\n".join(parts) + "\n"


def _md_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0; font-size: 0.88em; }
.scroll { overflow-x: auto; margin: 1em 0; }
.side { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; margin: 1em 0; }
.side > * { flex: 1 1 20em; min-width: 0; margin: 0; }
.side > .scroll { flex: none; width: min-content; max-width: 100%; }
.side > .stack { flex: 1 1 26em; }
.stack > .scroll { margin-top: 0; width: min-content; max-width: 100%; }
.stack ul { padding-left: 1.2em; font-size: 0.92em; }
.side td { white-space: nowrap; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
table.numeric td:not(:first-child) { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; }
img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #555; }
"""


def to_html(blocks: Iterable[Block], title: str) -> str:
    """A standalone HTML page of `blocks`; images inline as data: URIs."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + _html_blocks(blocks)
        + "\n</body>\n</html>\n"
    )


def _inline(text: str) -> str:
    """Escaped text, with the markdown's **bold** as <strong>, as the markdown file shows it."""
    return _BOLD.sub(r"<strong>\1</strong>", html.escape(text))


def _html_blocks(blocks: Iterable[Block]) -> str:
    body = []
    for block in blocks:
        if isinstance(block, SideBySide):
            left = (f'<div class="stack">{_html_blocks(block.left.blocks)}</div>' if isinstance(block.left, Stack)
                    else _html_blocks((block.left,)))
            body.append(f'<div class="side">{left}\n{_html_blocks((block.right,))}</div>')
        elif isinstance(block, Heading):
            body.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            # A table wider than the page scrolls in its own box; the page never scrolls sideways.
            body.append(f'<div class="scroll">{_html_table(block)}</div>')
        else:
            data = base64.b64encode(block.png).decode("ascii")
            caption = html.escape(block.caption)
            body.append(
                f'<figure id="figure-{html.escape(block.name)}"><img src="data:image/png;base64,{data}"'
                f' alt="{caption}"><figcaption>{caption}</figcaption></figure>'
            )
    return "\n".join(body)


def _html_table(table: Table) -> str:
    attributes = f' id="{html.escape(table.table_id)}"' if table.table_id else ""
    if table.numeric:
        attributes += ' class="numeric"'
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in table.header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    return f"<table{attributes}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
