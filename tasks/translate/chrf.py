"""chrF (Popović 2015) of many segment pairs at once: for each pair the score sacrebleu's ``CHRF().sentence_score``
gives (character n-grams of orders 1-6, whitespace removed, β = 2), with the n-gram counting done in numpy for
all pairs together instead of one ``Counter`` per order and segment. The counts are integers, so they are exact;
the score comes from them by chrF's formula as sacrebleu computes it (the F-β of the precision and recall averaged
over the orders a pair has n-grams of on both sides: sacrebleu's default "effective order"), vectorised over the
pairs with the same floating-point operations in the same order, so it is the same float (tests/test_translate_chrf.py
checks it against sacrebleu's public ``CHRF().sentence_score``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..imports import one_import_at_a_time

if TYPE_CHECKING:
    from sacrebleu.metrics import CHRF
CHUNK = 256
"""Pairs counted together: enough for numpy to pay, few enough that each order's hash table of n-grams stays in
the processor's cache (counting 2,048 pairs at once takes twice as long per n-gram)."""


@functools.cache
def _chrf() -> CHRF:
    """sacrebleu's defaults, the metric the translate stage reports (``char_order`` 6, ``word_order`` 0); loaded
    when a stage first scores, so that a rebuild taking translate from the cache does not import sacrebleu."""
    with one_import_at_a_time():
        from sacrebleu.metrics import CHRF

    return CHRF()


def chrf_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """The sentence chrF (0-100) of each hypothesis against its one reference, :data:`CHUNK` pairs at a time."""
    if len(hypotheses) != len(references):
        raise ValueError(f"chrF: {len(hypotheses)} hypotheses but {len(references)} references")
    return [
        score
        for start in range(0, len(hypotheses), CHUNK)
        for score in _chunk_scores(hypotheses[start : start + CHUNK], references[start : start + CHUNK])
    ]


def _chunk_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Per pair and order n, sacrebleu's three statistics: the hypothesis's n-grams, the reference's and their
    matches (Σ over n-grams of the smaller count). The n-gram at each position is numbered within its pair, so that
    the same n-gram in the hypothesis and in the reference has one number: the (n-1)-gram's number paired with the
    n-th character, numbered again (one hashing per order); a position too near its text's end for an n-gram holds
    -1. The hypotheses' characters come first, the references' after them, so each side is a slice."""
    chrf = _chrf()
    count = len(hypotheses)
    stripped = ["".join(text.split()) for text in [*hypotheses, *references]]  # chrF reads no whitespace
    lengths = np.fromiter(map(len, stripped), dtype=np.int64, count=len(stripped))
    size = int(lengths.sum())
    codes = np.frombuffer("".join(stripped).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    codes = np.concatenate([codes, np.zeros(chrf.char_order, dtype=np.int64)])  # read past the last text's end
    pair = np.repeat(np.tile(np.arange(count), 2), lengths)
    left = np.repeat(np.cumsum(lengths), lengths) - np.arange(size)
    """Characters from each position to the end of its text."""
    hypothesis_end = int(lengths[:count].sum())
    base = int(codes.max(initial=0)) + 1
    ids = pair * base + codes[:size]  # below size * base: no overflow
    stats = np.zeros((count, 3 * chrf.char_order), dtype=np.int64)
    for n in range(1, chrf.char_order + 1):
        if n > 1:
            ids = np.where(left >= n, ids * base + codes[n - 1 : n - 1 + size], -1)
        numbers, distinct = pd.factorize(ids)
        in_hyp = np.bincount(numbers[:hypothesis_end], minlength=len(distinct))
        in_ref = np.bincount(numbers[hypothesis_end:], minlength=len(distinct))
        pair_of = np.zeros(len(distinct), dtype=np.int64)
        pair_of[numbers] = pair
        matches = np.where(distinct >= 0, np.minimum(in_hyp, in_ref), 0)  # none at a position past its text's end
        totals = np.maximum(lengths - (n - 1), 0)
        hyp_total, ref_total = totals[:count], totals[count:]
        stats[:, 3 * n - 3] = np.where(ref_total > 0, hyp_total, 0)  # sacrebleu counts no hits without a reference
        stats[:, 3 * n - 2] = ref_total
        stats[:, 3 * n - 1] = np.bincount(pair_of, weights=matches, minlength=count)
        ids = numbers.astype(np.int64)  # the next order marks the positions past their text's end again
    return _f_scores(stats, chrf.char_order, chrf.beta)


def _f_scores(stats: np.ndarray, orders: int, beta: float) -> list[float]:
    """chrF (0-100) of each row of ``stats`` (per order: hypothesis n-grams, reference n-grams, matches): the
    precision and recall summed, order by order, over the orders with n-grams on both sides, averaged, and their
    F-β; 0 when no order has any (sacrebleu's effective-order smoothing, its default)."""
    factor = beta**2
    precision = np.zeros(len(stats))
    recall = np.zeros(len(stats))
    effective = np.zeros(len(stats), dtype=np.int64)
    for n in range(orders):
        hyp, ref, match = (stats[:, 3 * n + k].astype(np.float64) for k in range(3))
        both = (hyp > 0) & (ref > 0)
        precision += np.where(both, match / np.where(both, hyp, 1), 0.0)
        recall += np.where(both, match / np.where(both, ref, 1), 0.0)
        effective += both
    mean_precision = np.where(effective > 0, precision / np.maximum(effective, 1), 0.0)
    mean_recall = np.where(effective > 0, recall / np.maximum(effective, 1), 0.0)
    total = mean_precision + mean_recall
    score = (1 + factor) * mean_precision * mean_recall / np.where(total > 0, factor * mean_precision + mean_recall, 1)
    return np.where(total > 0, 100 * score, 0.0).tolist()
