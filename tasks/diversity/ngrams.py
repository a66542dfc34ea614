"""N-gram diversity (PBBQ Appendix C.3) and the type-token ratio (Appendix C.2), two of Table 2's four metrics
(§3.5), and the n-gram code tables they share with Self-BLEU (:mod:`pbbq.tasks.diversity.self_bleu`).

Both take a group's distinct units as token lists (their words: a language's ``words``), so n-grams
are counted on integer codes, not on strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

NGRAM_ORDER = 4  # n = 1..4 for NGD (Appendix C.3) and BLEU's default maximum order


@dataclass(frozen=True)
class CodedTexts:
    """Texts each tokenised once and coded by one vocabulary, so that every group a table measures (a category,
    then all of them) takes its units' codes instead of tokenising and comparing strings again."""

    tokens: Mapping[str, np.ndarray]
    """Per text, the vocabulary code of each of its tokens (BLEU's tokens, punctuation included)."""
    words: Mapping[str, np.ndarray]
    """Per text, the code of each of its words (the lexical metrics' tokens); equal words, equal codes."""
    stop: np.ndarray
    """Per word code, whether the word is a stop word (TTR leaves those out)."""


def code_texts(
    texts: Iterable[str],
    tokenize: Callable[[str], list[str]],
    words: Callable[[Sequence[str]], list[str]],
    stop_words: frozenset[str],
) -> CodedTexts:
    """Each distinct text tokenised once (``tokenize``, a language's), its tokens coded; each distinct token read
    as a word once (``words``, a language's: a token gives one word or, punctuation, none)."""
    distinct = list(dict.fromkeys(texts))
    codes, vocabulary, lengths = _vocabulary_codes(tokenize(text) for text in distinct)
    word_codes: dict[str, int] = {}
    word_of_token = np.array(
        [word_codes.setdefault(word[0], len(word_codes)) if (word := words([token])) else -1 for token in vocabulary],
        dtype=np.int64,
    )
    words_of_tokens = word_of_token[codes]
    is_word = words_of_tokens >= 0
    word_lengths = np.bincount(np.repeat(np.arange(len(distinct)), lengths)[is_word], minlength=len(distinct))
    stop = np.array([word in stop_words for word in word_codes], dtype=bool)
    return CodedTexts(
        dict(zip(distinct, _slices(codes, lengths), strict=True)),
        dict(zip(distinct, _slices(words_of_tokens[is_word], word_lengths), strict=True)),
        stop,
    )


def _slices(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """``flat`` cut into consecutive pieces of ``lengths`` (views; plain slices cost a tenth of ``np.split``)."""
    ends = np.cumsum(lengths).tolist()
    return [flat[start:end] for start, end in zip([0, *ends][:-1], ends, strict=True)]


CODED_AT_ONCE = 1 << 20
"""About this many tokens are held as strings at a time by :func:`_vocabulary_codes`: a config's contexts are tens of
millions of tokens at scale (481,008 ``en-names`` contexts: 29 million), each a string of its own."""


def _vocabulary_codes(token_lists: Iterable[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The integer code of every token of the concatenated lists (numbered in order of first appearance), the
    distinct tokens by code, and the length of each list. The lists are read one at a time and coded about
    :data:`CODED_AT_ONCE` tokens at a time, so a generator's lists and their strings are freed as they are read:
    only the distinct tokens are kept (tens of thousands of lists held at once set off the garbage collector's
    full passes over the whole process)."""
    vocabulary: dict[str, int] = {}
    coded: list[np.ndarray] = []
    lengths: list[int] = []
    batch: list[str] = []

    def code_batch() -> None:
        local, distinct = pd.factorize(np.array(batch, dtype=object))  # in order of first appearance, as a whole
        known = [vocabulary.setdefault(token, len(vocabulary)) for token in distinct]
        coded.append(np.array(known, dtype=np.int64)[local])
        batch.clear()

    for tokens in token_lists:
        batch.extend(tokens)
        lengths.append(len(tokens))
        if len(batch) >= CODED_AT_ONCE:
            code_batch()
    if batch or not coded:
        code_batch()
    tokens_by_code = np.empty(len(vocabulary), dtype=object)
    tokens_by_code[:] = list(vocabulary)
    return np.concatenate(coded), tokens_by_code, np.array(lengths, dtype=np.int64)


def token_codes(token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The integer code of every token of the concatenated lists, and the length of each list."""
    codes, _, lengths = _vocabulary_codes(token_lists)
    return codes, lengths


def joined_codes(units: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`token_codes` of units already coded (:class:`CodedTexts`): the same compact codes, numbered in order of
    first appearance, from integers instead of strings."""
    lengths = np.fromiter((len(unit) for unit in units), dtype=np.int64, count=len(units))
    flat = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    return pd.factorize(flat)[0].astype(np.int64, copy=False), lengths


def ngram_codes(codes: np.ndarray) -> Iterator[np.ndarray]:
    """For n = 1..4 in turn, a compact code (0..k-1, k = #distinct n-grams) of the n-gram starting at each position
    of the code sequence, n-grams spanning list boundaries included (len(codes) - n + 1 codes). Each is made from
    the one before as it is asked for, so a caller that reads them in turn holds two, not four (an Overall row's
    are tens of millions of codes at scale)."""
    base = int(codes.max()) + 1 if len(codes) else 1
    grams = codes
    yield grams
    for n in range(1, NGRAM_ORDER):
        # the (n+1)-gram at p is the n-gram at p followed by the token at p + n; codes < len(codes), so the
        # pair code stays below len(codes)**2 and fits int64
        grams = pd.factorize(grams[:-1] * base + codes[n:])[0].astype(np.int64, copy=False)
        yield grams


def ngram_diversity_of_codes(codes: np.ndarray) -> float:
    """N-gram diversity, Appendix C.3: NGD(D) = Σ_{n=1..4} #unique n-grams in D⊕ / #n-grams in D⊕, of the units'
    compact codes (:func:`token_codes`, :func:`joined_codes`).

    D⊕ is the dataset "concatenated into a single string": the units' token lists are joined into one
    sequence, in the order given, and n-grams are counted over it, so an n-gram may span two units. Units are
    the distinct contexts of a group, tokens their words (punctuation out, stop words kept:
    a language's ``words``). Ranges over (0, 4]. NaN when D⊕ has fewer than 4 tokens (a ratio is 0/0).
    """
    if len(codes) < NGRAM_ORDER:
        return math.nan
    return float(sum((grams.max() + 1) / len(grams) for grams in ngram_codes(codes)))


def type_token_ratio_of_codes(units: Sequence[np.ndarray], stop: np.ndarray) -> float:
    """Type-token ratio, Appendix C.2: #unique words / #words of T, stop words removed, of a group's units as
    their words' vocabulary codes (:attr:`CodedTexts.words`), ``stop`` marking the codes of stop words
    (:attr:`CodedTexts.stop`).

    T is all units of a group taken together (the distinct contexts' words, punctuation out); ``stop`` marks its
    language's ``stop_words``. NaN when no word is left.
    """
    words = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    kept = words[~stop[words]]
    return len(np.unique(kept)) / len(kept) if len(kept) else math.nan
