"""Frames read and built column by column: a frame's rows as Python values (what ``DataFrame.to_dict(orient=
"records")`` gives, without its per-cell boxing, and only the columns a loop reads), and a frame from its columns'
lists. The translate stage loops over its segments and examples once each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd


def records(frame: pd.DataFrame, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The frame's rows as dictionaries of its columns ``names`` (default: all of them)."""
    names = list(frame.columns) if names is None else list(names)
    return [dict(zip(names, values, strict=True)) for values in zip(*(frame[c].tolist() for c in names), strict=True)]


def from_columns(columns: Mapping[str, Sequence[Any]], names: Sequence[str]) -> pd.DataFrame:
    """The frame of the columns ``names``, each from its values; without rows, of object columns, as a frame of no
    records is (pandas would read an empty list as float, and a string column's ``.str`` would fail)."""
    if not any(len(values) for values in columns.values()):
        return pd.DataFrame([], columns=list(names))
    return pd.DataFrame({name: columns[name] for name in names})
