"""The adaptation path's funnel names the configs its source examples are in without copying their rows (issue 35:
at the 100 × 100 blow-up the 160,432 source rows were copied whole, 317 MB, to read their configs' names)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pbbq.tasks.core.soundness import source_entities
from pbbq.tasks.statistics import funnel
from tests.release_support import make_examples


class RowsNotCopied(pd.DataFrame):
    """Examples that refuse to be cut by a row mask (what would copy every column of the rows kept)."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def __getitem__(self, key: object) -> object:
        assert not (isinstance(key, pd.Series | np.ndarray) and key.dtype == bool), "the rows were copied"
        return super().__getitem__(key)


def test_the_adaptation_funnel_counts_configs_without_copying_rows() -> None:
    source = make_examples(4, lang="en").assign(source_example_id=None)
    names = make_examples(6, lang="en", variant="names-1", salt="n")
    names["source_example_id"] = source["example_id"].iloc[0]
    examples = RowsNotCopied(pd.concat([source, names], ignore_index=True))
    steps = funnel(None, pd.DataFrame(), examples, None, extra=[("sheet_rows", 3)])
    assert steps.to_dict(orient="records") == [
        {"step": "sheet_rows", "count": 3},
        {"step": "examples_en-names", "count": 6},
    ]


def test_the_source_entities_are_read_without_copying_every_column_of_the_originals() -> None:
    """The soundness gate's originals (:func:`source_entities`): the entity each option names, by example id, read
    from the columns it needs (at the blow-up, every column of the 160,432 originals was copied: 317 MB)."""
    originals = make_examples(4, lang="en")
    examples = pd.concat([originals, make_examples(6, lang="en", variant="names-1", salt="n")], ignore_index=True)
    entities = source_entities(RowsNotCopied(examples), "en")
    assert entities.equals(source_entities(examples.iloc[: len(originals)].copy(), "en"))
    assert list(entities.index) == list(originals["example_id"]) and entities.notna().all().all()
