"""A quick evaluation's examples (``pbbq evaluate --limit N``): N examples of each config, stratified, paired.

Taking a config's first N rows gives one or two templates of one category, so every category but one is missing,
a bootstrap over templates has nothing to resample, and ``fa`` and ``fa-names`` share no example, so ε_c cannot be
computed. Instead, for each config:

- the rows are drawn round-robin over the strata of BBQ's design (Parrish et al. 2022 §3; PBBQ §3.3):
  category × context condition × question polarity, one row per stratum per round, strata and rows in an order
  drawn from the seed (``--seed``), so that N ≥ the number of strata covers every stratum;
- ``fa-names`` rows (on an adaptation release ``en-names``: :func:`paired_configs`) are name variants of ``fa``
  rows that are drawn too (their ``source_example_id``), as ε_c pairs them (the name-proxy paper §4.3.3): the
  sources are drawn first, round-robin over their strata, at least one per ``fa-names`` stratum and enough for N
  variants, and their variants are taken one sub-seed per source in turn; ``fa`` then adds rows round-robin over
  the strata the sources leave uncovered;
- any other config with a ``source_example_id`` (``en``: the translations) prefers the rows whose source was drawn
  in ``fa``, stratum by stratum, so that the languages are compared on the same examples where they can be.

The selection is the same for every model (the metrics compare models on the same examples) and lists row
positions in the order lm-eval reads the release (its shards sorted by name, concatenated).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .metrics import names_pairs

STRATUM = ("category", "context_condition", "question_polarity")
"""BBQ's design cells a quick run covers."""
COLUMNS = ("example_id", *STRATUM, "variant", "source_example_id")
EXPLICIT, NAMES = "fa", "fa-names"
"""The configs a release pairs when it has no other config with its name-proxy variant (:func:`paired_configs`)."""


def paired_configs(configs: Iterable[str]) -> tuple[str, str]:
    """The source config and its name-proxy variant the draw pairs (as ε_c pairs them, :func:`names_pairs`): the
    first of ``configs`` that has its variant among them (``en`` and ``en-names`` on the adaptation path), else
    ``fa`` and ``fa-names``."""
    return next(iter(names_pairs(configs)), (EXPLICIT, NAMES))


def read_config(folder: Path, config: str) -> pd.DataFrame:
    """The columns the selection needs of one config of a release folder, in lm-eval's row order."""
    shards = sorted((folder / "data" / config).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(shard, columns=list(COLUMNS)) for shard in shards]).to_pandas()


def _strata(frame: pd.DataFrame) -> pd.Series:
    """Each row's stratum, as one string."""
    first, *rest = (frame[column].astype(str) for column in STRATUM)
    for column in rest:
        first = first + " | " + column
    return first


def _rng(seed: int, config: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(hashlib.sha256(config.encode()).hexdigest()[:8], 16)])


def round_robin(
    strata: pd.Series, rng: np.random.Generator, *, prefer: np.ndarray | None = None, taken: Counter[str] | None = None
) -> np.ndarray:
    """Positions of the rows in draw order: one row per stratum per round, rows and strata in random order; the
    ``prefer`` rows first within their stratum and their strata first within a round; a stratum that already has
    ``taken[stratum]`` rows joins from that round on."""
    n = len(strata)
    shuffle = rng.permutation(n)
    other = np.ones(n, dtype=bool) if prefer is None else ~np.asarray(prefer, dtype=bool)
    frame = pd.DataFrame({"position": shuffle, "stratum": strata.to_numpy()[shuffle], "other": other[shuffle]})
    frame = frame.sort_values("other", kind="stable")
    frame["round"] = frame.groupby("stratum").cumcount() + frame["stratum"].map(taken or {}).fillna(0).astype(int)
    order = {stratum: rank for rank, stratum in enumerate(frame["stratum"].unique())}
    frame["rank"] = frame["stratum"].map(order)
    return frame.sort_values(["round", "rank"], kind="stable")["position"].to_numpy()


@dataclass
class Selection:
    """Per config, the row positions to evaluate (ascending), and what they cover."""

    docs: dict[str, list[int]] = field(default_factory=dict)
    report: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, config: str, frame: pd.DataFrame, positions: np.ndarray, paired: int | None = None) -> None:
        chosen = sorted(int(position) for position in positions)
        strata = _strata(frame)
        self.docs[config] = chosen
        self.report[config] = {
            "rows": len(chosen),
            "of": len(frame),
            "strata": int(strata.nunique()),
            "strata_covered": int(strata.iloc[chosen].nunique()),
            **({"paired": paired} if paired is not None else {}),
        }

    def ids(self, config: str, frame: pd.DataFrame) -> set[str]:
        """The example ids drawn from ``config``."""
        return set(frame["example_id"].iloc[self.docs[config]])

    def sources(self, config: str, frame: pd.DataFrame) -> set[str]:
        """The source example ids of the rows drawn from ``config``."""
        return set(frame["source_example_id"].iloc[self.docs[config]].dropna())


def _names_and_sources(
    names: pd.DataFrame, explicit: pd.DataFrame, limit: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``fa-names`` rows (positions) and the ``fa`` rows they vary (positions): sources drawn round-robin over
    their strata, as many as the variants need and at least one per stratum, then one variant per source in turn,
    each source's sub-seeds rotated so that every sub-seed is drawn about as often."""
    known = names[names["source_example_id"].isin(explicit["example_id"])]
    variants = known.groupby("source_example_id").groups
    sources = explicit[explicit["example_id"].isin(variants)]
    per_source = max(len(rows) for rows in variants.values())
    wanted = min(limit, max(math.ceil(limit / per_source), _strata(known).nunique()), len(sources))
    drawn = sources.iloc[round_robin(_strata(sources), _rng(seed, NAMES))[:wanted]]
    turns = []
    for index, source in enumerate(drawn["example_id"]):
        rows = sorted(variants[source], key=lambda row: names.at[row, "variant"])
        turns += [(turn, index, rows[(index + turn) % len(rows)]) for turn in range(len(rows))]
    picked = [row for _, _, row in sorted(turns)[:limit]]
    return names.index.get_indexer(picked), explicit.index.get_indexer(drawn.index)


def select_examples(frames: Mapping[str, pd.DataFrame], limit: int, seed: int) -> Selection:
    """``limit`` rows of each config in ``frames`` (config → :func:`read_config`), as the module says."""
    selection = Selection()
    frames = {config: frame.reset_index(drop=True) for config, frame in frames.items()}
    source, variants = paired_configs(frames)
    small = {config for config, frame in frames.items() if len(frame) <= limit}
    for config in small:
        selection.add(config, frames[config], np.arange(len(frames[config])))
    explicit, names = frames.get(source), frames.get(variants)
    if explicit is not None and names is not None and not {source, variants} & small:
        picked, sources = _names_and_sources(names, explicit, limit, seed)
        selection.add(variants, names, picked, paired=len(picked))
        rest = explicit.drop(index=sources)
        fill = round_robin(_strata(rest), _rng(seed, source), taken=Counter(_strata(explicit).iloc[sources]))
        selection.add(source, explicit, np.concatenate([sources, rest.index[fill[: limit - len(sources)]]]))
    for config in sorted(frames, key=lambda name: (name != source, name)):
        if config in selection.docs:
            continue
        frame = frames[config]
        if config == source:  # a release whose fa-names is whole: its sources first
            drawn = selection.sources(variants, names) if names is not None and variants in selection.docs else set()
            prefer = frame["example_id"].isin(drawn).to_numpy()
        else:
            drawn = selection.ids(source, explicit) if source in selection.docs else set()
            prefer = frame["source_example_id"].isin(drawn).to_numpy()
        positions = round_robin(_strata(frame), _rng(seed, config), prefer=prefer)[:limit]
        selection.add(config, frame, positions, paired=int(prefer[positions].sum()) if drawn else None)
    return selection
