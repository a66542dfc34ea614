"""A stage that is not PBBQ's, to show that adding one is this file plus one entry in a pipeline, and adding an input
file one declaration (tests/test_stage_contract.py): it drops the English examples whose context is longer than a
limit, its category's in a new input file (``[inputs] context_limits``) or the default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.inputs import InputError, read_csv_filled, require_none
from pbbq.tasks.core.schemas import EXAMPLE, EXAMPLE_DROPPED
from pbbq.tasks.core.stage import Input, Stage, Table
from pbbq.tasks.text.categories import CATEGORIES

LENGTHS = pa.schema([("example_id", pa.string()), ("words", pa.int64())])


@dataclass(frozen=True)
class ContextLengthParams:
    max_words: int = 60
    """The longest English context kept, in words."""


def load_limits(path: Path) -> pd.DataFrame:
    """``category, max_words``: a category's longest English context, in words (a positive whole number)."""
    frame = read_csv_filled(path, ["category", "max_words"])
    require_none(path, ~frame["category"].isin(CATEGORIES), lambda i: f"unknown category {frame.at[i, 'category']!r}")
    words = pd.to_numeric(frame["max_words"], errors="coerce")
    require_none(path, ~(words >= 1), lambda i: f"max_words {frame.at[i, 'max_words']!r} is not a positive number")
    if frame["category"].duplicated().any():
        raise InputError(path, None, "a category appears twice")
    return frame.assign(max_words=words.astype("int64"))


LIMITS = Input("context_limits", load_limits)


def context_length(examples: pd.DataFrame, limits: pd.DataFrame, params: ContextLengthParams) -> StageOutput:
    """Every English example's context length; those over their category's limit (``limits``, else
    ``params.max_words``) dropped with their reason."""
    words = examples["context"].str.split().str.len().astype("int64")
    limit = examples["category"].map(limits.set_index("category")["max_words"]).fillna(params.max_words)
    too_long = words > limit
    return StageOutput(
        tables={
            "examples": examples[~too_long],
            "lengths": pd.DataFrame({"example_id": examples["example_id"], "words": words}),
            "dropped": examples[too_long].assign(reason="context_too_long"),
        },
        schemas={},
        report={"counts": {"in": len(examples), "out": int((~too_long).sum())}},
    )


STAGE = Stage(
    "08_context_length",
    "context_length",
    context_length,
    inputs={"examples": Table("07_translate", "examples"), "limits": LIMITS},
    outputs={"examples": EXAMPLE, "lengths": LENGTHS, "dropped": EXAMPLE_DROPPED},
    params=ContextLengthParams,
    ranges={"max_words": (1, None)},
    drops=("dropped",),
    words=("English examples", "short enough", "English contexts over the length limit"),
    funnel={"en_short_contexts": "English examples with a short context"},
    counts=lambda output: {"en_short_contexts": len(output["examples"])},
)
