"""chrF (Popović 2015) of many segment pairs at once: for each pair the score sacrebleu's ``CHRF().sentence_score``
gives (character n-grams of orders 1-6, whitespace removed, β = 2), with the n-gram counting done in numpy for
all pairs together instead of one ``Counter`` per order and segment. The counts are integers, so they are exact;
the score comes from them by sacrebleu's own formula, so it is the same float.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sacrebleu.metrics import CHRF

_CHRF = CHRF()
"""sacrebleu's defaults, the metric the translate stage reports (``char_order`` 6, ``word_order`` 0)."""
CHUNK = 2048
"""Pairs counted together: large enough for numpy to pay, small enough to hold little memory."""


def _ngram_ids(texts: Sequence[str], order: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per n of 1 … ``order``: for each n-gram of every text (whitespace removed, as chrF reads it) the index of its
    text and an id of the n-gram, equal for equal n-grams. An n-gram's id is that of its first n-1 characters
    paired with its last character, numbered again: ids stay below the count of positions."""
    stripped = ["".join(text.split()) for text in texts]
    lengths = np.fromiter(map(len, stripped), dtype=np.int64, count=len(stripped))
    codes = np.frombuffer("".join(stripped).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    owner = np.repeat(np.arange(len(texts)), lengths)
    left = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(codes))
    """Characters from each position to the end of its text."""
    base = int(codes.max(initial=0)) + 1
    positions, ids = np.arange(len(codes)), codes
    found = []
    for n in range(1, order + 1):
        if n > 1:
            keep = left[positions] >= n
            positions = positions[keep]
            ids = pd.factorize(ids[keep] * base + codes[positions + n - 1])[0].astype(np.int64)
        found.append((owner[positions], ids))
    return found


def chrf_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """The sentence chrF (0-100) of each hypothesis against its one reference, :data:`CHUNK` pairs at a time (the
    n-gram arrays of all pairs at once would hold every character seven times over)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"chrF: {len(hypotheses)} hypotheses but {len(references)} references")
    return [
        score
        for start in range(0, len(hypotheses), CHUNK)
        for score in _chunk_scores(hypotheses[start : start + CHUNK], references[start : start + CHUNK])
    ]


def _chunk_scores(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    count = len(hypotheses)
    stats = np.zeros((count, 3 * _CHRF.char_order), dtype=np.int64)
    for n, (owner, ids) in enumerate(_ngram_ids([*hypotheses, *references], _CHRF.char_order)):
        segment = owner % count
        width = int(ids.max(initial=0)) + 1
        ngram = segment * width + ids
        """An n-gram within its segment: equal for the same n-gram in the hypothesis and in the reference."""
        is_hypothesis = owner < count
        numbers, distinct = pd.factorize(ngram)
        in_hyp = np.bincount(numbers[is_hypothesis], minlength=len(distinct))
        in_ref = np.bincount(numbers[~is_hypothesis], minlength=len(distinct))
        matches = np.minimum(in_hyp, in_ref)
        hyp_total = np.bincount(segment[is_hypothesis], minlength=count)
        ref_total = np.bincount(segment[~is_hypothesis], minlength=count)
        stats[:, 3 * n] = np.where(ref_total > 0, hyp_total, 0)  # sacrebleu counts no hits without a reference
        stats[:, 3 * n + 1] = ref_total
        stats[:, 3 * n + 2] = np.bincount(distinct // width, weights=matches, minlength=count)
    return [_CHRF._compute_f_score(row) for row in stats.tolist()]
