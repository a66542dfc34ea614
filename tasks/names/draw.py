"""Seeding and drawing the names of name-proxy variants (Obscured but Not Erased §4.1.1 'Random Seed
Initialisation' and 'Name Selection', Appendix C).

- **Sub-seeds** (Appendix C): ``np.random.seed(42)``, then ``np.random.randint(1, 10000, 3)`` = 7271, 861, 5391;
  one variant per sub-seed (:func:`sub_seeds`).
- **One stream per entity pair and sub-seed**: ``np.random.default_rng([sub_seed, example_seed(pair_key)])``, the
  key naming the template, the two entities and the lexical variant
  (:meth:`pbbq.tasks.names.prepare.Prepared.pair_key`): the twelve examples of a pair take the same names, so its
  mirrored examples differ only in who did what; the names depend on the sub-seed and the pair, not on the other
  rows of the table.
- **A draw** takes from that stream, in this order: (1) the era, uniformly among the eras the pair may have (all
  three, unless an entity's age band narrows them: :data:`ERAS_BY_AGE_BAND`); (2) the gender, female or male
  uniformly, when neither entity's reference gives one, for both names (two roommates are two men or two women);
  an entity without a gender whose partner has one takes the partner's; (3) the first entity's name, uniformly
  among its group's names of that era and gender; (4) the second entity's, uniformly among its group's, leaving
  out the first name and any name that contains it or is part of it (:func:`apart`). Both names therefore come
  from one era, and share one gender where the entities do.
- **Distinct variants**: a pair's variants are drawn in sub-seed order; a draw whose names repeat a name pair
  already taken (by an earlier variant of the pair, or by any variant of a pair with an example that reads the
  same once named and whose key sorts first, see :func:`pbbq.tasks.names.variants.draw_all`) is drawn again from
  the same stream (its next values), until it differs. So the three variants are three different rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableSet, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..text.cues import NONE
from .patterns import NEUTRAL
from .tables import ERAS, GENDERS, table_eras

ERAS_BY_AGE_BAND: dict[str, tuple[str, ...]] = {
    "child": ("post1995",),
    "teen": ("post1995",),
    "youth": ("1970-1995", "post1995"),
    "young": ("1970-1995", "post1995"),
    "middle": ("pre1970", "1970-1995"),
    "old": ("pre1970",),
    "adult": ERAS,
    NONE: ERAS,
}
"""The eras a person of an age band (:func:`pbbq.tasks.text.cues.entity_age_band`) can be born in, for people described
today: 20–39 years old were born 1985–2005, 40–59 in 1965–1985, 60 and over before 1965, under 20 after 2005."""

Pools = Mapping[tuple[str, str, str, str], tuple[str, ...]]
"""(lang, group, gender, era) → the names to draw from, sorted."""


def sub_seeds(seed: int, n_seeds: int) -> list[int]:
    """The sub-seeds of Appendix C: ``np.random.seed(seed); np.random.randint(1, 10000, n_seeds)``, drawn from a
    private ``RandomState`` (the same Mersenne Twister stream) so numpy's global state is left alone."""
    return [int(s) for s in np.random.RandomState(seed).randint(1, 10000, n_seeds)]


def example_seed(example_id: str) -> int:
    """The example's part of its streams' seed: the first 64 bits of the sha256 of its id."""
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest()[:16], 16)


def example_stream(sub_seed: int, example_id: str) -> np.random.Generator:
    """The stream one example draws its names from under one sub-seed."""
    return np.random.default_rng([sub_seed, example_seed(example_id)])


def name_pools(table: pd.DataFrame) -> dict[tuple[str, str, str, str], tuple[str, ...]]:
    """(lang, group, gender, era) → the names of that group, gender and era, sorted so the table's row order does
    not matter (a name common in several eras is in each of their pools)."""
    pools: dict[tuple[str, str, str, str], list[str]] = {}
    for row, eras in zip(table.itertuples(), table_eras(table), strict=True):
        for era in eras:
            pools.setdefault((row.lang, row.group, row.gender, era), []).append(row.name)
    return {key: tuple(sorted(names)) for key, names in pools.items()}


def pair_eras(age_bands: Sequence[str]) -> tuple[str, ...]:
    """The eras both entities can be born in, in :data:`ERAS` order (empty when their age bands share none)."""
    allowed = [set(ERAS_BY_AGE_BAND.get(band, ERAS)) for band in age_bands]
    return tuple(era for era in ERAS if all(era in eras for eras in allowed))


@dataclass(frozen=True)
class PairRequest:
    """What one example asks of its names: the language, each entity's group and name gender (female, male or
    neutral) and the eras the pair may be drawn from."""

    lang: str
    groups: tuple[str, str]
    genders: tuple[str, str]
    eras: tuple[str, ...]


@dataclass(frozen=True)
class Drawn:
    """One draw: the era and the two names (first entity, second entity)."""

    era: str
    names: tuple[str, str]


def gender_choices(genders: tuple[str, str]) -> list[tuple[str, str]]:
    """The gender pairs the names may have: the entities' own; one gender for both when neither has one (first
    female, then male); the partner's for an entity without one."""
    first, second = genders
    if first == NEUTRAL and second == NEUTRAL:
        return [(gender, gender) for gender in GENDERS]
    return [(second if first == NEUTRAL else first, first if second == NEUTRAL else second)]


def _pool(pools: Pools, request: PairRequest, index: int, gender: str, era: str) -> tuple[str, ...]:
    return pools.get((request.lang, request.groups[index], gender, era), ())


def draw_pair(pools: Pools, request: PairRequest, rng: np.random.Generator) -> Drawn:
    """One draw (module docstring, steps 1–4) from ``rng``; a draw that lands on an empty pool (a review round took
    its names out of the draw: ``pbbq.tasks.review.names``) is drawn again from the same stream, so a table whose
    pools are all filled draws as before. The caller knows a pair is possible (:func:`possible_pairs`)."""
    while True:
        era = request.eras[int(rng.integers(len(request.eras)))]
        choices = gender_choices(request.genders)
        genders = choices[int(rng.integers(len(choices)))] if len(choices) > 1 else choices[0]
        first_pool = _pool(pools, request, 0, genders[0], era)
        if not first_pool:
            continue
        first = first_pool[int(rng.integers(len(first_pool)))]
        second_pool = [name for name in _pool(pools, request, 1, genders[1], era) if apart(first, name)]
        if second_pool:
            return Drawn(era, (first, second_pool[int(rng.integers(len(second_pool)))]))


def apart(first: str, second: str) -> bool:
    """Two names a pair may have: neither is part of the other ('حسین' and 'خادم‌حسین' would let a string match
    of one option find the other)."""
    return first not in second and second not in first


def possible_pairs(pools: Pools, request: PairRequest) -> set[tuple[str, str]]:
    """Every name pair a draw can give for ``request``."""
    pairs: set[tuple[str, str]] = set()
    for era in request.eras:
        for genders in gender_choices(request.genders):
            for first in _pool(pools, request, 0, genders[0], era):
                pairs.update((first, s) for s in _pool(pools, request, 1, genders[1], era) if apart(first, s))
    return pairs


class TooFewPairs(ValueError):
    """Fewer name pairs are free than variants are asked for."""

    def __init__(self, free: int, wanted: int) -> None:
        super().__init__(f"{free} name pair(s) left for {wanted} variants")
        self.free, self.wanted = free, wanted


def draw_variants(
    pools: Pools, request: PairRequest, example_id: str, seeds: Sequence[int], taken: MutableSet[tuple[str, str]]
) -> list[tuple[Drawn, int]]:
    """One draw per sub-seed, each from its own stream and different from every pair in ``taken`` (which it joins),
    with the number of draws it took. Raises :class:`TooFewPairs` (taking nothing) when fewer pairs are free than
    there are sub-seeds, so the redrawing always ends."""
    free = len(possible_pairs(pools, request) - set(taken))
    if free < len(seeds):
        raise TooFewPairs(free, len(seeds))
    drawn = []
    for sub_seed in seeds:
        rng = example_stream(sub_seed, example_id)
        attempts = 1
        result = draw_pair(pools, request, rng)
        while result.names in taken:
            result = draw_pair(pools, request, rng)
            attempts += 1
        taken.add(result.names)
        drawn.append((result, attempts))
    return drawn
