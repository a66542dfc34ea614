"""A round's items chosen (all, or a seeded sample stratified by category and source) and assigned to reviewers
(each item to ``overlap`` of them, at least two, so that their agreement can be measured)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .items import ITEM_COLUMNS, content_hash

MIN_OVERLAP = 2
"""Reviewers per item below which agreement cannot be measured."""

ASSIGNMENT_COLUMNS = ["round_id", "kind", "item_id", "hash", "reviewer"]


def stratified_sample(items: pd.DataFrame, size: int | None, seed: int) -> pd.DataFrame:
    """``size`` items of each kind (None, or at least as many as a kind has: all of it), so that a round of
    contexts, translations and names samples each (2,370 translation segments beside 48 contexts would otherwise
    take every place); within a kind, drawn without replacement per stratum (``category``, ``source``) in
    proportion to its size (largest remainder; a stratum never gets fewer than one while ``size`` allows), seeded;
    in the items' order."""
    items = items.sort_values(["kind", "item_id"], kind="stable").reset_index(drop=True)
    if size is None:
        return items
    if size < 1:
        raise ValueError(f"a sample of {size} items: give at least 1")
    kinds = [_kind_sample(part, size, seed) for _, part in items.groupby("kind", sort=True)]
    return pd.concat(kinds, ignore_index=True) if kinds else items


def _kind_sample(items: pd.DataFrame, size: int, seed: int) -> pd.DataFrame:
    """:func:`stratified_sample` of one kind's items."""
    items = items.reset_index(drop=True)
    if size >= len(items):
        return items
    strata = items.groupby(["category", "source"], sort=True).indices
    keys = sorted(strata)
    sizes = np.array([len(strata[k]) for k in keys], dtype=float)
    quota = sizes * size / sizes.sum()
    taken = np.floor(quota).astype(int)
    if size >= len(keys):
        taken = np.maximum(taken, 1)
    while taken.sum() > size:
        taken[int(np.argmax(taken - quota))] -= 1
    for index in np.argsort(-(quota - taken), kind="stable")[: size - taken.sum()]:
        taken[index] += 1
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for key, count in zip(keys, taken, strict=True):
        members = strata[key]
        chosen += sorted(rng.choice(members, size=min(int(count), len(members)), replace=False).tolist())
    return items.loc[sorted(chosen)].reset_index(drop=True)


def round_id(items: pd.DataFrame, reviewers: Sequence[str], overlap: int, seed: int) -> str:
    """A round's id, from what it asks of whom: the same export gives the same id."""
    return "round-" + content_hash(*items["hash"], *reviewers, str(overlap), str(seed))[:10]


def assign(items: pd.DataFrame, reviewers: Sequence[str], overlap: int, seed: int) -> pd.DataFrame:
    """Each item to ``overlap`` distinct reviewers, the load spread evenly: the items in a seeded order, the
    reviewers taken in turn (item ``i`` of that order gets reviewers ``i .. i + overlap - 1``, modulo their
    number)."""
    names = list(dict.fromkeys(r.strip() for r in reviewers if r.strip()))
    if len(names) != len(reviewers):
        raise ValueError(f"reviewers {', '.join(reviewers)}: each once, none empty")
    if overlap < MIN_OVERLAP:
        raise ValueError(f"overlap {overlap}: each item needs at least {MIN_OVERLAP} reviewers to measure agreement")
    if overlap > len(names):
        raise ValueError(f"overlap {overlap} with {len(names)} reviewer(s): name at least {overlap}")
    identity = round_id(items, names, overlap, seed)
    order = np.random.default_rng(seed).permutation(len(items))
    turns = np.repeat(np.arange(len(items)), overlap)
    steps = np.tile(np.arange(overlap), len(items))
    at = order[turns]
    table = pd.DataFrame(
        {
            "round_id": identity,
            "kind": items["kind"].to_numpy(dtype=object)[at],
            "item_id": items["item_id"].to_numpy(dtype=object)[at],
            "hash": items["hash"].to_numpy(dtype=object)[at],
            "reviewer": np.array(names, dtype=object)[(turns + steps) % len(names)],
        },
        columns=ASSIGNMENT_COLUMNS,
    )
    return table.sort_values(["reviewer", "kind", "item_id"], kind="stable").reset_index(drop=True)


__all__ = ["ASSIGNMENT_COLUMNS", "ITEM_COLUMNS", "assign", "round_id", "stratified_sample"]
