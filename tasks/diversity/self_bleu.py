"""Self-BLEU (PBBQ Appendix C.1; Zhu et al., 2018), one of Table 2's four metrics (§3.5): exactly the mean of
sacrebleu's ``sentence_bleu`` of every unit against all the others, computed from n-gram count tables
(:mod:`pbbq.tasks.diversity.ngrams`) instead of n² BLEU calls; the score itself is sacrebleu's own
``BLEU.compute_bleu``. ``benchmarks/self_bleu.py`` times it against the pairwise calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np
import pandas as pd

from ..imports import one_import_at_a_time
from ..text.languages.en import tokenize_en
from .ngrams import NGRAM_ORDER, ngram_codes, token_codes


def _clipped_matches(grams: np.ndarray, owner: np.ndarray, n_units: int) -> np.ndarray:
    """Per unit, Σ over its n-grams of min(its count, the largest count in any OTHER unit).

    That is BLEU's clipped match count against all other units as references (sacrebleu merges the
    references' counts by max). The largest count over the others is the n-gram's largest count over all
    units, unless this unit holds it alone; then it is the second largest (0 if no other unit has the n-gram).
    """
    if len(grams) == 0:
        return np.zeros(n_units, dtype=np.int64)
    count, gram, unit = _unit_counts(grams, owner, n_units)
    size = int(gram.max()) + 1
    top = np.zeros(size, dtype=np.int64)
    np.maximum.at(top, gram, count)
    at_top = count == top[gram]
    n_at_top = np.bincount(gram[at_top], minlength=size)
    below_top = np.zeros(size, dtype=np.int64)
    np.maximum.at(below_top, gram, np.where(at_top, 0, count))
    second = np.where(n_at_top >= 2, top, below_top)
    best_other = np.where(at_top, second[gram], top[gram])
    clipped = np.minimum(count, best_other)
    return np.rint(np.bincount(unit, weights=clipped, minlength=n_units)).astype(np.int64)


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


def _sentence_bleu_scores(token_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """sacrebleu's sentence_bleu score (0-100) of every unit against all the others, from n-gram tables.

    Equal to ``sentence_bleu(' '.join(h), [' '.join(r) for r in others], tokenize='none')`` with sacrebleu's
    defaults (exp smoothing, effective order); the statistics are counted here, the score is sacrebleu's own
    ``BLEU.compute_bleu``. Needs at least 2 units.
    """
    return _bleu_scores(*token_codes(token_lists))


def _bleu_scores(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`_sentence_bleu_scores` of the units' compact codes and lengths (:func:`.ngrams.token_codes`); units
    with the same statistics share one ``compute_bleu`` call."""
    n_units = len(lengths)
    unit_of = np.repeat(np.arange(n_units, dtype=np.int64), lengths)
    correct = np.zeros((n_units, NGRAM_ORDER), dtype=np.int64)
    for n, grams in enumerate(ngram_codes(codes), start=1):
        owner = unit_of[: len(grams)]
        inside = owner == unit_of[n - 1 :]  # the n-gram starts and ends in the same unit
        correct[:, n - 1] = _clipped_matches(grams[inside], owner[inside], n_units)
    totals = np.maximum(lengths[:, None] - np.arange(NGRAM_ORDER)[None, :], 0)
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
    return self_bleu_of_codes(*token_codes(token_lists))


def self_bleu_of_codes(codes: np.ndarray, lengths: np.ndarray) -> float:
    """:func:`self_bleu` of units already coded: their compact codes and lengths (:func:`.ngrams.joined_codes`)."""
    if len(lengths) < 2:
        return math.nan
    return float(np.mean(_bleu_scores(codes, lengths))) / 100
