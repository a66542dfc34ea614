"""N-gram diversity (PBBQ Appendix C.3) and the type-token ratio (Appendix C.2), two of Table 2's four metrics
(§3.5), and the n-gram code tables they share with Self-BLEU (:mod:`pbbq.tasks.diversity.self_bleu`).

Both take a group's distinct units as token lists (their words: a language's ``words``), so n-grams
are counted on integer codes, not on strings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

NGRAM_ORDER = 4  # n = 1..4 for NGD (Appendix C.3) and BLEU's default maximum order


def token_codes(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The integer code of every token of the concatenated lists, and the length of each list."""
    lengths = np.fromiter((len(tokens) for tokens in token_lists), dtype=np.int64, count=len(token_lists))
    flat = np.array([token for tokens in token_lists for token in tokens], dtype=object)
    return pd.factorize(flat)[0].astype(np.int64), lengths


def ngram_codes(codes: np.ndarray) -> list[np.ndarray]:
    """For n = 1..4, a compact code (0..k-1, k = #distinct n-grams) of the n-gram starting at each position
    of the code sequence, n-grams spanning list boundaries included (len(codes) - n + 1 codes)."""
    base = int(codes.max()) + 1 if len(codes) else 1
    orders = [codes]
    for n in range(1, NGRAM_ORDER):
        # the (n+1)-gram at p is the n-gram at p followed by the token at p + n; codes < len(codes), so the
        # pair code stays below len(codes)**2 and fits int64
        orders.append(pd.factorize(orders[-1][:-1] * base + codes[n:])[0].astype(np.int64))
    return orders


def ngram_diversity(token_lists: Sequence[Sequence[str]]) -> float:
    """N-gram diversity, Appendix C.3: NGD(D) = Σ_{n=1..4} #unique n-grams in D⊕ / #n-grams in D⊕.

    D⊕ is the dataset "concatenated into a single string": the units' token lists are joined into one
    sequence, in the order given, and n-grams are counted over it, so an n-gram may span two units. Units are
    the distinct contexts of a group, tokens their words (punctuation out, stop words kept:
    a language's ``words``). Ranges over (0, 4]. NaN when D⊕ has fewer than 4 tokens (a ratio is 0/0).
    """
    codes, _ = token_codes(token_lists)
    if len(codes) < NGRAM_ORDER:
        return math.nan
    return float(sum((grams.max() + 1) / len(grams) for grams in ngram_codes(codes)))


def type_token_ratio(token_lists: Sequence[Sequence[str]], stop_words: frozenset[str]) -> float:
    """Type-token ratio, Appendix C.2: #unique words / #words of T, stop words removed.

    T is all units of a group taken together (the distinct contexts' words, punctuation out); ``stop_words``
    is its language's ``stop_words``. NaN when no word is left.
    """
    kept = [token for tokens in token_lists for token in tokens if token not in stop_words]
    return len(set(kept)) / len(kept) if kept else math.nan
