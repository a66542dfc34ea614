"""Markdown tables: the one renderer of the build's and the evaluation's tables (Table 2 in ``08_diversity``, the
dataset card's tables, the evaluation's ``tables.md``)."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence


def cell(value: object) -> str:
    """``value`` as the text of a cell: a float with four decimals ('not computed' for NaN); anything else as
    text, ``|`` escaped and line breaks as spaces, so that the row stays one row of the table."""
    if isinstance(value, float):
        return "not computed" if math.isnan(value) else f"{value:.4f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    bold: Collection[str] = (),
    label: int = 0,
    right_from: int | None = None,
) -> str:
    """A Markdown table (no line break at its end): the header row, the alignment row, then each row's values as
    :func:`cell` writes them (text formatted beforehand passes unchanged when it holds no ``|``).

    A row whose cell in column ``label`` is one of ``bold`` is set in bold (Total, Average, Overall rows). The
    columns from ``right_from`` on are right-aligned (``---:``), the others (all when None) left (``---``)."""
    align = ["---" if right_from is None or column < right_from else "---:" for column in range(len(headers))]
    lines = [_row(headers), _row(align)]
    for row in rows:
        cells = [cell(value) for value in row]
        if len(cells) > label and cells[label] in bold:
            cells = [f"**{text}**" for text in cells]
        lines.append(_row(cells))
    return "\n".join(lines)
