"""The draws of names for every prepared example and the variant rows they make."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..core.schemas import OPTIONS
from .draw import Drawn, Pools, TooFewPairs, draw_variants
from .patterns import fill
from .prepare import ENTITY_COLUMNS, TEXT_FIELDS, DrawKey, DrawOrder, Prepared, Unmapped


def _listed(value: Iterable[str] | None) -> list[str]:
    """A list column's value as a list (parquet gives arrays, hand-made rows lists or None)."""
    return [] if value is None else list(value)


def _pairs_reading_alike(pairs: Mapping[DrawKey, Sequence[Prepared]]) -> list[list[DrawKey]]:
    """The pair keys grouped so that two pairs with an example that reads the same once named (e.g. 'کارگر ترک'
    and 'جوان ترک', both a name) are in one group; groups and their keys sorted."""
    parent = {key: key for key in pairs}

    def root(key: DrawKey) -> DrawKey:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    first_of_reading: dict[tuple[str, ...], DrawKey] = {}
    for key in sorted(pairs):
        for item in pairs[key]:
            other = first_of_reading.setdefault(item.reading(), key)
            parent[root(key)] = root(other)
    groups: dict[DrawKey, list[DrawKey]] = {}
    for key in sorted(pairs):
        groups.setdefault(root(key), []).append(key)
    return sorted(groups.values())


def variant_fields(item: Prepared, names: Sequence[str], variant: str, shared: dict[Any, Any]) -> dict[str, Any]:
    """What the variant ``variant`` (``names-<sub-seed>``) of ``item`` with ``names`` changes in its row: new
    texts, ``answer_info`` texts rewritten with the options, tags kept (the BBQ record format lm-evaluation-harness
    reads). An option's text, ``answer_info`` and the LLM requests are the objects ``shared`` holds for their value
    (it keeps the first it is given): the variants of a stage repeat few of their values, and hold one object per
    value (issue 35)."""
    texts = {field: fill(item.texts[field], names) if field in item.texts else item.row[field] for field in TEXT_FIELDS}
    for option in OPTIONS:
        texts[option] = shared.setdefault(texts[option], texts[option])
    info = {option: _listed(item.row["answer_info"][option]) for option in OPTIONS}
    for option in OPTIONS:
        if option in item.texts:
            info[option] = [texts[option], info[option][1]]
    requests = [*_listed(item.row["llm_request_ids"]), *item.request_ids]
    return {
        **texts,
        "answer_info": shared.setdefault(("answer_info", *(tuple(info[option]) for option in OPTIONS)), info),
        "example_id": f"{item.example_id}-{variant}",
        "variant": variant,
        "source_example_id": item.row["example_id"],
        "llm_request_ids": shared.setdefault(("llm_request_ids", *requests), requests),
    }


def rows_at(
    examples: pd.DataFrame, positions: Sequence[int], columns: Sequence[str], values: Mapping[str, Sequence[Any]]
) -> pd.DataFrame:
    """The input's rows at ``positions`` (repeats allowed), in that order, as ``columns`` (a column the input
    lacks is empty), the columns of ``values`` (column → one value per row) put in; no row: the empty frame of
    ``columns``. Built at once: only the columns ``values`` does not give are taken from the input."""
    if not positions:
        return pd.DataFrame(columns=list(columns))
    at = np.asarray(positions, dtype=np.intp)

    def column_at(column: str) -> Any:
        if column in values:
            return values[column]
        if column in examples.columns:
            return examples[column].array.take(at)
        return np.full(len(at), np.nan)

    return pd.DataFrame({column: column_at(column) for column in columns})


def draw_all(
    mapped: Sequence[Prepared], pools: Pools, seeds: Sequence[int]
) -> tuple[dict[str, list[tuple[Drawn, int]]], list[tuple[Prepared, Unmapped, DrawOrder]]]:
    """The draws of every example (per sub-seed: the names and how many draws it took), and the examples left
    without enough free name pairs, each with where its draw came. One draw per entity pair and genders
    (:meth:`Prepared.draw_key`), from the pair's own stream; pairs whose examples would read the same once named are
    drawn in key order against one set of taken name pairs, so that no two of them get the same names (module
    docstring of :mod:`pbbq.tasks.names.draw`)."""
    pairs: dict[DrawKey, list[Prepared]] = {}
    for item in mapped:
        pairs.setdefault(item.draw_key(), []).append(item)
    linked = _pairs_reading_alike(pairs)
    drawn: dict[str, list[tuple[Drawn, int]]] = {}
    short: list[tuple[Prepared, Unmapped, DrawOrder]] = []
    for component in linked:
        taken: set[tuple[str, str]] = set()
        for key in component:
            members = pairs[key]
            first = min(members, key=lambda p: p.example_id)
            try:
                draws = draw_variants(pools, first.request(), key[0], seeds, taken)
            except TooFewPairs as error:
                entities = [first.row[column] for column in ENTITY_COLUMNS]
                why = Unmapped("too_few_distinct_names", entities, str(error))
                short += [(item, why, (component[0], key)) for item in members]
                continue
            drawn.update((item.example_id, draws) for item in members)
    return drawn, short


def read_with_slots(item: Prepared) -> str:
    """How an example reads with slots for its names (:meth:`Prepared.reading`), as one text."""
    return "\n".join(item.reading())
