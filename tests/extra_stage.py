"""A stage that is not PBBQ's, to show that adding one is this file plus one entry in ``PIPELINE``
(tests/test_stage_contract.py): it drops the English examples whose context is longer than a limit."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from pbbq.tasks.core.artifacts import StageOutput
from pbbq.tasks.core.schemas import EXAMPLE, EXAMPLE_DROPPED
from pbbq.tasks.core.stage import Stage, Table

LENGTHS = pa.schema([("example_id", pa.string()), ("words", pa.int64())])


@dataclass(frozen=True)
class ContextLengthParams:
    max_words: int = 60
    """The longest English context kept, in words."""


def context_length(examples: pd.DataFrame, params: ContextLengthParams) -> StageOutput:
    """Every English example's context length; those over ``params.max_words`` dropped with their reason."""
    words = examples["context"].str.split().str.len().astype("int64")
    too_long = words > params.max_words
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
    inputs={"examples": Table("07_translate", "examples")},
    outputs={"examples": EXAMPLE, "lengths": LENGTHS, "dropped": EXAMPLE_DROPPED},
    params=ContextLengthParams,
    ranges={"max_words": (1, None)},
    drops=("dropped",),
    words=("English examples", "short enough", "English contexts over the length limit"),
    funnel={"en_short_contexts": "English examples with a short context"},
    counts=lambda output: {"en_short_contexts": len(output["examples"])},
)
