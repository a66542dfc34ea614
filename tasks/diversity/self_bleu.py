"""Self-BLEU (PBBQ Appendix C.1; Zhu et al., 2018), one of Table 2's four metrics (§3.5): exactly the mean of
sacrebleu's ``sentence_bleu`` of every unit against all the others, computed from n-gram count tables
(:mod:`pbbq.tasks.diversity.ngrams`) instead of n² BLEU calls; the score itself is sacrebleu's own
``BLEU.compute_bleu``. ``benchmarks/self_bleu.py`` times it against the pairwise calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import islice, pairwise
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..imports import one_import_at_a_time
from ..text.languages.en import tokenize_en
from .ngrams import NGRAM_ORDER, TOKENS_AT_ONCE, CodedTexts, code_token_lists, ngram_keys, unit_slices


def _top_two(values: np.ndarray, group: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group 0..size-1, the largest of its values (≥ 0) and the second largest, counted with repeats (the
    largest again when two values share it; 0 when there is no other value)."""
    top = np.zeros(size, dtype=np.int64)
    np.maximum.at(top, group, values)
    at_top = values == top[group]
    n_at_top = np.bincount(group[at_top], minlength=size)
    below_top = np.zeros(size, dtype=np.int64)
    np.maximum.at(below_top, group, np.where(at_top, 0, values))
    return top, np.where(n_at_top >= 2, top, below_top)


class _SliceCounts(NamedTuple):
    """The n-grams of a slice of whole units: each distinct n-gram's key, and each (n-gram, unit) once with its number
    of occurrences, its n-gram (a row of ``keys``) and its unit (a position in the slice, of ``n_units``)."""

    n_units: int
    keys: np.ndarray
    occurrences: np.ndarray
    gram: np.ndarray
    unit: np.ndarray


def _slice_counts(coded: CodedTexts, units: np.ndarray, n: int) -> _SliceCounts:
    """:class:`_SliceCounts` of the n-grams of the units ``units`` (ascending) of ``coded``; n-grams that span two
    units are left out (BLEU scores each unit alone)."""
    codes, lengths = coded.codes_of(units)
    grams = next(islice(ngram_keys(codes, len(coded.word_of_token)), n - 1, None))
    unit_of = np.repeat(np.arange(len(units), dtype=np.int64), lengths)
    owner = unit_of[: len(grams)]
    inside = owner == unit_of[n - 1 :]  # the n-gram starts and ends in the same unit
    if not inside.any():
        empty = np.zeros(0, dtype=np.int64)
        return _SliceCounts(len(units), empty, empty, empty, empty)
    local, keys = pd.factorize(grams[inside])
    count, gram, unit = _unit_counts(local.astype(np.int64, copy=False), owner[inside], len(units))
    return _SliceCounts(len(units), keys, count, gram, unit)


class _TopCounts:
    """Per n-gram key, its largest and second largest count in any unit (:func:`_top_two`) and a unit that holds the
    largest (the only one when the second is smaller), reduced over the slices of a group: each slice's table is
    kept, and merged with those before once they are as large."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.first = np.zeros(0, dtype=np.int64)
        self.second = np.zeros(0, dtype=np.int64)
        self.holder = np.zeros(0, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_size = 0

    def add(self, counts: _SliceCounts, first_unit: int) -> None:
        """Take in a slice's counts, its units numbered from ``first_unit`` in the group."""
        first, second = _top_two(counts.occurrences, counts.gram, len(counts.keys))
        holder = np.zeros(len(counts.keys), dtype=np.int64)
        at_top = counts.occurrences == first[counts.gram]
        holder[counts.gram[at_top]] = counts.unit[at_top] + first_unit
        self._pending.append((counts.keys, first, second, holder))
        self._pending_size += len(counts.keys)
        if self._pending_size >= len(self.keys):
            self.merge()

    def merge(self) -> None:
        """Merge the slices' tables taken in since the last merge: the two largest of a key's counts are the two
        largest of the largest and second largest of each table it is in; a holder of the largest, one of a table
        whose largest it is."""
        if not self._pending:
            return
        if len(self.keys) == 0 and len(self._pending) == 1:  # one table: its keys are distinct
            self.keys, self.first, self.second, self.holder = self._pending.pop()
        else:
            parts = [(self.keys, self.first, self.second, self.holder), *self._pending]
            which, self.keys = pd.factorize(np.concatenate([part[0] for part in parts]))
            firsts = np.concatenate([part[1] for part in parts])
            self.first, self.second = _top_two(firsts, which, len(self.keys))
            np.maximum.at(self.second, which, np.concatenate([part[2] for part in parts]))
            at_top = firsts == self.first[which]
            self.holder = np.zeros(len(self.keys), dtype=np.int64)
            self.holder[which[at_top]] = np.concatenate([part[3] for part in parts])[at_top]
        self._pending, self._pending_size = [], 0


def _clipped_matches(coded: CodedTexts, slices: Sequence[np.ndarray], n: int, totals: np.ndarray) -> np.ndarray:
    """Per unit of the ``slices`` (runs of units of ``coded``, :func:`.ngrams.unit_slices`), Σ over its n-grams of
    min(its count, the largest count in any OTHER unit); ``totals``, each unit's number of n-grams.

    That is BLEU's clipped match count against all other units as references (sacrebleu merges the
    references' counts by max). The largest count over the others is the n-gram's largest count over all
    units, unless this unit holds it alone; then it is the second largest (0 if no other unit has the n-gram).
    So a unit matches all its n-grams (``totals``) but, for each n-gram whose largest count it holds alone, the
    largest less the second largest: those are reduced over the slices (:class:`_TopCounts`), each counted once.
    """
    top = _TopCounts()
    first_unit = 0
    for units in slices:
        top.add(_slice_counts(coded, units, n), first_unit)
        first_unit += len(units)
    top.merge()
    alone = top.first > top.second
    excess = np.bincount(top.holder[alone], weights=top.first[alone] - top.second[alone], minlength=len(totals))
    return totals - np.rint(excess).astype(np.int64)


PAIR_CHUNK = 1 << 15
"""About this many n-grams are hashed at a time by :func:`_unit_counts`: a hash table of all of a group's (an
Overall row's hundreds of thousands at paper scale) outgrows the processor's cache and takes twice as long per
n-gram."""


def _unit_counts(grams: np.ndarray, owner: np.ndarray, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (n-gram, unit) once, with its count: by hashing rather than sorting (a third less time at paper
    scale), a slice of whole units at a time (``owner`` is sorted: a unit's n-grams are contiguous)."""
    steps = np.searchsorted(owner, owner[PAIR_CHUNK::PAIR_CHUNK])  # the first n-gram of a unit, every slice
    cuts = np.unique(np.concatenate([[0], steps, [len(owner)]]))
    counts, keys = [], []
    for start, end in pairwise(cuts.tolist()):
        pair, found = pd.factorize(grams[start:end] * n_units + owner[start:end])
        counts.append(np.bincount(pair, minlength=len(found)))
        keys.append(found)
    gram, unit = np.divmod(np.concatenate(keys), n_units)
    return np.concatenate(counts), gram, unit


def _closest_other_lengths(lengths: np.ndarray) -> np.ndarray:
    """Per unit, sacrebleu's effective reference length against all OTHER units: the length closest to its
    own, the shorter one on a tie (``BLEU._get_closest_ref_len``), found by bisection in the sorted lengths."""
    ordered = np.sort(lengths)
    left = np.searchsorted(ordered, lengths, side="left")
    right = np.searchsorted(ordered, lengths, side="right")
    far = np.int64(2**40)  # farther than any real length: marks a missing neighbour
    below = np.where(left > 0, ordered[np.maximum(left - 1, 0)], -far)
    above = np.where(right < len(ordered), ordered[np.minimum(right, len(ordered) - 1)], far)
    nearest = np.where(lengths - below <= above - lengths, below, above)
    return np.where(right - left >= 2, lengths, nearest)  # another unit has the same length


def _distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct rows of a matrix of counts (numbered in order of first appearance), and
    the first row of each: its columns folded into one code by hashing, a column at a time (numpy's unique rows
    sort them as records, ten times slower on an Overall row's tens of thousands of units)."""
    code = np.zeros(len(matrix), dtype=np.int64)
    for column in matrix.T:  # codes < #rows and counts < #tokens: the folded code fits int64
        code = pd.factorize(code * (int(column.max()) + 1) + column)[0].astype(np.int64)
    return code, np.unique(code, return_index=True)[1]


def _sentence_bleu_scores(token_lists: Sequence[Sequence[str]], tokens_at_once: int = TOKENS_AT_ONCE) -> np.ndarray:
    """sacrebleu's sentence_bleu score (0-100) of every unit against all the others, from n-gram tables.

    Equal to ``sentence_bleu(' '.join(h), [' '.join(r) for r in others], tokenize='none')`` with sacrebleu's
    defaults (exp smoothing, effective order); the statistics are counted here, the score is sacrebleu's own
    ``BLEU.compute_bleu``. Needs at least 2 units.
    """
    coded = code_token_lists(token_lists)
    return _bleu_scores(coded, np.arange(len(coded)), tokens_at_once)


def _bleu_scores(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int = TOKENS_AT_ONCE) -> np.ndarray:
    """:func:`_sentence_bleu_scores` of the units ``ids`` (ascending) of ``coded``, about ``tokens_at_once`` tokens
    at a time; units with the same statistics share one ``compute_bleu`` call."""
    lengths = coded.lengths(ids)
    slices = unit_slices(coded, ids, tokens_at_once)
    totals = np.maximum(lengths[:, None] - np.arange(NGRAM_ORDER)[None, :], 0)
    correct = np.column_stack([_clipped_matches(coded, slices, n, totals[:, n - 1]) for n in range(1, NGRAM_ORDER + 1)])
    statistics = np.column_stack([correct, totals, lengths, _closest_other_lengths(lengths)])
    which, first = _distinct_rows(statistics)
    distinct = statistics[first]
    with one_import_at_a_time():  # loaded when a stage first scores: a rebuild taking diversity from the cache has none
        from sacrebleu.metrics.bleu import BLEU

    scores = np.array(
        [
            BLEU.compute_bleu(
                correct=row[:NGRAM_ORDER].tolist(),
                total=row[NGRAM_ORDER : 2 * NGRAM_ORDER].tolist(),
                sys_len=int(row[-2]),
                ref_len=int(row[-1]),
                smooth_method="exp",
                effective_order=True,
            ).score
            for row in distinct
        ]
    )
    return scores[which]


def self_bleu(sentences: Sequence[str], tokenize: Callable[[str], list[str]] = tokenize_en) -> float:
    """Self-BLEU, Appendix C.1 (Zhu et al., 2018): the mean over units of the BLEU of the unit against all
    the others as references, on a 0-1 scale (sacrebleu's score / 100).

    Exactly the mean of sacrebleu's ``sentence_bleu(h, others)`` with its defaults (smooth_method='exp',
    effective order, 4-grams), but computed from n-gram count tables with no pairwise BLEU call. ``tokenize``
    gives BLEU's tokens: the default is sacrebleu's 13a tokenizer, so English equals ``tokenize='13a'`` on the
    raw text; for Persian pass ``pbbq.tasks.text.languages.fa.tokenize_fa`` (hazm), which equals sacrebleu on the tokens
    joined by spaces with ``tokenize='none'``, so both sides see the same tokens. Punctuation tokens count, as
    in BLEU. Units are the distinct contexts of a group; an empty unit scores 0 (as sacrebleu) and still counts
    as a reference of length 0. NaN (not computed) for fewer than 2 units: there is no reference.
    """
    return self_bleu_of_tokens([tokenize(sentence) for sentence in sentences])


def self_bleu_of_tokens(token_lists: Sequence[Sequence[str]]) -> float:
    """:func:`self_bleu` of already tokenised units."""
    coded = code_token_lists(token_lists)
    return self_bleu_of_units(coded, np.arange(len(coded)))


def self_bleu_of_units(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int = TOKENS_AT_ONCE) -> float:
    """:func:`self_bleu` of the units ``ids`` (ascending) of texts already coded, about ``tokens_at_once`` tokens
    at a time."""
    if len(ids) < 2:
        return math.nan
    return float(np.mean(_bleu_scores(coded, ids, tokens_at_once))) / 100
