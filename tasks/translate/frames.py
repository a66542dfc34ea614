"""Reading a frame's rows as Python values, column by column: what ``DataFrame.to_dict(orient="records")`` gives,
without its per-cell boxing, and only the columns a loop reads (the translate stage loops over its segments and
examples once each)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd


def records(frame: pd.DataFrame, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The frame's rows as dictionaries of its columns ``names`` (default: all of them)."""
    names = list(frame.columns) if names is None else list(names)
    return [dict(zip(names, values, strict=True)) for values in zip(*(frame[c].tolist() for c in names), strict=True)]
