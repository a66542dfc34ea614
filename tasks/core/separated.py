"""A :class:`~.stage.Separable` stage run by key: each key's part taken from the content store or computed
(docs/architecture.md §9)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .artifacts import ArtifactStore, StageOutput
from .code_hash import stage_code_hash
from .digests import input_digest, row_hashes
from .stage import Separable
from .stored import KeptInput, loaded


def _in_key_order(pieces: list[tuple[pd.DataFrame, Collection[str] | None]], key: str) -> pd.DataFrame:
    """The rows of each frame whose key is among its wanted keys (None: every row), keys not overlapping across
    the frames, stacked in key order, each key's rows in their order: one copy into the stack and one take from it
    (a frame with no row wanted adds no rows, nor its columns' dtypes)."""
    keys = [frame[key].astype(str).to_numpy() for frame, _ in pieces]
    wanted = [
        np.ones(len(frame), dtype=bool) if values is None else pd.Series(of).isin(values).to_numpy()
        for (frame, values), of in zip(pieces, keys, strict=True)
    ]
    filled = [i for i, rows in enumerate(wanted) if rows.any()] or [0]
    stacked = pd.concat([pieces[i][0] for i in filled], ignore_index=True)
    rows = np.flatnonzero(np.concatenate([wanted[i] for i in filled]))
    order = rows[np.argsort(np.concatenate([keys[i] for i in filled])[rows], kind="stable")]
    return stacked.take(order).reset_index(drop=True)


def _by_content(value: Any) -> Any:
    """A part's argument as its key takes it: a build input's table itself (the name table checked against other
    templates is the same table: its :class:`KeptInput` key, which names the inputs it was checked against, would
    change with every template), anything else as the stage's cache key takes it."""
    if isinstance(value, KeptInput) and isinstance(value.load(), pd.DataFrame):
        return value.load()
    return value


def _kept_by_key(
    fn: Callable[..., Mapping[str, pd.DataFrame]],
    key: str,
    hook: dict[str, Any],
    split: Mapping[str, pd.DataFrame],
    hashes: Mapping[str, Mapping[str, str]],
    others: str,
    store: ArtifactStore,
) -> tuple[dict[str, pd.DataFrame], Mapping[str, pd.DataFrame], list[str], list[str]]:
    """``fn``'s tables of every key of the ``split`` tables (their rows' :func:`row_hashes` in ``hashes``; ``hook``:
    what ``fn`` takes besides them, :meth:`~.stage.Separable.hook_arguments`): each
    key's taken from ``store`` when its rows, the other arguments (``others``: their digest), ``fn``'s code and this
    function's are those it was made from, the others computed in one call of ``fn`` on their rows and kept (that
    call's tables, one file). Returns every key's tables in key order (``fn``'s own when it computed every key),
    those it computed, the keys it computed and every key."""
    code = {"code": stage_code_hash(fn), "function": fn.__qualname__, "runner": stage_code_hash(separated)}
    common = json.dumps(code | {"others": others}, sort_keys=True, default=str)
    keys = sorted(set().union(*hashes.values()))
    part_keys = {value: json.dumps([common, value, [hashes[name].get(value) for name in split]]) for value in keys}
    kept = {value: store.recall(part_key) for value, part_key in part_keys.items()}
    missing = [value for value in keys if kept[value] is None]
    computed: Mapping[str, pd.DataFrame] = {}
    if missing or not keys:  # no key at all: ``fn`` gives the tables, empty
        subset = {
            name: frame[frame[key].astype(str).isin(missing)].reset_index(drop=True) for name, frame in split.items()
        }
        computed = fn(**hook | subset)
        batch = store.put_pickled(dict(computed))[0]  # one file (one sync) for the keys of one call
        for value in missing:
            store.remember(part_keys[value], batch)
    tables = dict(computed)
    if len(missing) < len(keys):  # some kept: every key's rows, from the call that made them, in key order
        batches: dict[str, list[str]] = {}
        for value, digest in kept.items():
            if digest is not None:
                batches.setdefault(digest, []).append(value)
        pieces: list[tuple[Mapping[str, pd.DataFrame], Collection[str] | None]] = [(computed, None)] if computed else []
        for digest, values in batches.items():
            pieces.append((store.load_pickled(digest), set(values)))
        names = list(pieces[0][0])
        tables = {name: _in_key_order([(made[name], values) for made, values in pieces], key) for name in names}
    return tables, computed, missing, keys


def separated(per: Separable, arguments: Mapping[str, Any], store: ArtifactStore) -> tuple[StageOutput, dict[str, Any]]:
    """A :class:`~.stage.Separable` stage run by key: ``local``'s tables and then ``part``'s, each key's taken from
    ``store`` or computed (:func:`_kept_by_key`; ``part``'s by the key's rows of the split tables and of those
    ``spread`` makes), then ``whole`` on every part. Returns the output and what was computed: how many keys, and
    how many rows of the part's first table, of how many."""
    found = {name: loaded(value) for name, value in arguments.items()}
    others = {name: _by_content(value) for name, value in arguments.items() if name not in per.split}
    digest = json.dumps(input_digest(others), sort_keys=True, default=str)
    hook = per.hook_arguments(found)
    whole = {name: found[name] for name in per.split}
    split = dict(whole)
    hashes = {name: row_hashes(frame, per.key) for name, frame in split.items()}
    if per.spread is not None:
        local = _kept_by_key(per.local, per.key, hook, split, hashes, digest, store)[0] if per.local else {}
        spread = dict(per.spread(**hook | whole | local))
        split |= spread
        hashes |= {name: row_hashes(frame, per.key) for name, frame in spread.items()}
    tables, computed, missing, keys = _kept_by_key(per.part, per.key, hook, split, hashes, digest, store)
    first = next(iter(tables))
    counts = {
        "key": per.key,
        "computed": len(missing),
        "of": len(keys),
        "table": first,
        "rows": [len(computed[first]) if missing else 0, len(tables[first])],
    }
    return per.whole(tables, **hook | whole), counts
