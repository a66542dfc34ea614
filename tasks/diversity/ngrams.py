"""N-gram diversity (PBBQ Appendix C.3) and the type-token ratio (Appendix C.2), two of Table 2's four metrics
(§3.5), and the n-gram code tables they share with Self-BLEU (:mod:`pbbq.tasks.diversity.self_bleu`).

All take a group's distinct units as the integer codes of their tokens (:class:`CodedTexts`), not strings, and a
slice of units at a time (:func:`unit_slices`), so that their working memory does not grow with the group: n-grams
are packed into one int64 key each (:func:`ngram_keys`) and what a metric needs of them (the distinct ones; for
Self-BLEU, the two largest counts in any unit) is reduced across slices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

NGRAM_ORDER = 4  # n = 1..4 for NGD (Appendix C.3) and BLEU's default maximum order


@dataclass(frozen=True)
class CodedTexts:
    """Texts each tokenised once and coded by one vocabulary, so that every group a table measures (a category,
    then all of them) takes its units' codes instead of tokenising and comparing strings again. Unit ``i`` is the
    ``i``-th text given; its codes are one slice of one flat array (no object per unit), in the smallest integer
    type that holds the vocabulary's codes."""

    tokens: np.ndarray
    """The vocabulary code of each token (BLEU's tokens, punctuation included) of every text, one text after the
    other."""
    starts: np.ndarray
    """Where each text's tokens start in :attr:`tokens`, and, last, their end: text ``i`` is
    ``tokens[starts[i]:starts[i + 1]]``."""
    word_of_token: np.ndarray
    """Per token code, the code of its word (the lexical metrics' tokens; equal words, equal codes), -1 for a token
    that is no word (punctuation)."""
    stop: np.ndarray
    """Per word code, whether the word is a stop word (TTR leaves those out)."""

    def __len__(self) -> int:
        return len(self.starts) - 1

    def lengths(self, ids: np.ndarray) -> np.ndarray:
        """The number of tokens of each unit ``ids``."""
        return self.starts[ids + 1] - self.starts[ids]

    def codes_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The token codes (int64) of the units ``ids`` (ascending) one after the other, and each one's length."""
        starts, lengths = self.starts[ids], self.lengths(ids)
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64), lengths
        if ids[-1] - ids[0] == len(ids) - 1:  # consecutive units: one slice
            return self.tokens[starts[0] : starts[-1] + lengths[-1]].astype(np.int64), lengths
        index = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        return self.tokens[index].astype(np.int64), lengths

    def words_of(self, codes: np.ndarray) -> np.ndarray:
        """The word codes of token codes (:meth:`codes_of`), tokens that are no word left out."""
        words = self.word_of_token[codes]
        return words[words >= 0]


def code_texts(
    texts: Sequence[str],
    tokenize: Callable[[str], list[str]],
    words: Callable[[Sequence[str]], list[str]],
    stop_words: frozenset[str],
) -> CodedTexts:
    """Each text tokenised (``tokenize``, a language's) and its tokens coded, unit ``i`` the ``i``-th text (give each
    text once); each distinct token read as a word once (``words``, a language's: a token gives one word or,
    punctuation, none)."""
    codes, vocabulary, lengths = _vocabulary_codes(tokenize(text) for text in _one_at_a_time(texts))
    word_codes: dict[str, int] = {}
    word_of_token = np.array(
        [word_codes.setdefault(word[0], len(word_codes)) if (word := words([token])) else -1 for token in vocabulary],
        dtype=np.int64,
    )
    stop = np.array([word in stop_words for word in word_codes], dtype=bool)
    return CodedTexts(codes, _starts(lengths), word_of_token, stop)


def _one_at_a_time(texts: Sequence[str]) -> Iterator[str]:
    """The texts in turn, made Python strings a few thousand at a time (a column's Arrow strings are not all
    converted at once)."""
    step = 4096
    for start in range(0, len(texts), step):
        yield from np.asarray(texts[start : start + step], dtype=object).tolist()


def code_token_lists(token_lists: Sequence[Sequence[str]]) -> CodedTexts:
    """Units given as token lists, coded: each token is a word of its own, none a stop word."""
    codes, vocabulary, lengths = _vocabulary_codes(token_lists)
    return CodedTexts(
        codes, _starts(lengths), np.arange(len(vocabulary), dtype=np.int64), np.zeros(len(vocabulary), dtype=bool)
    )


def _starts(lengths: np.ndarray) -> np.ndarray:
    """:attr:`CodedTexts.starts` of texts of ``lengths`` tokens."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


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
        coded.append(np.array(known, dtype=_code_type(len(vocabulary)))[local])
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


def _code_type(vocabulary_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds the codes of a vocabulary (a config's tens of millions of tokens
    take 2 bytes each, not 8, below 65,536 distinct tokens); as the vocabulary grows, so does the type of the later
    batches', and their concatenation takes the largest."""
    return np.min_scalar_type(max(vocabulary_size - 1, 0))


TOKENS_AT_ONCE = 1 << 20
"""About this many tokens of a group are taken at a time by the metrics (:func:`unit_slices`): an Overall row at
scale is tens of millions of tokens, and its n-gram tables, built a slice at a time and reduced across slices, stay
the size of the distinct n-grams instead of a few arrays of every position."""

PACKED_KEYS_BELOW = 2**63
"""An n-gram of codes below V is packed into one int64, ((c0·V + c1)·V + c2)·V + c3, when V ** 4 is at most this:
then equal n-grams have equal keys in every slice. Above it (more than 55,108 distinct tokens), a group is taken
whole and its n-grams numbered by :func:`ngram_codes`."""


def unit_slices(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int) -> list[np.ndarray]:
    """The units ``ids`` cut into runs of consecutive ones of about ``tokens_at_once`` tokens each (a unit longer than
    that alone), all of them in one run when the vocabulary is too large for packed keys
    (:data:`PACKED_KEYS_BELOW`)."""
    ends = np.cumsum(coded.lengths(ids))
    if len(ids) == 0:
        return []
    if not packs(len(coded.word_of_token)):
        return [ids]
    marks = np.arange(tokens_at_once, int(ends[-1]), tokens_at_once)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(ends, marks) + 1, [len(ids)]]))
    return [ids[start:end] for start, end in pairwise(cuts.tolist())]


def packs(vocabulary_size: int) -> bool:
    """Whether n-grams of a vocabulary's codes pack into one int64 each (:data:`PACKED_KEYS_BELOW`)."""
    return max(vocabulary_size, 1) ** NGRAM_ORDER <= PACKED_KEYS_BELOW


def ngram_keys(codes: np.ndarray, vocabulary_size: int) -> Iterator[np.ndarray]:
    """For n = 1..4 in turn, a key of the n-gram starting at each position of the int64 code sequence, n-grams
    spanning list boundaries included (len(codes) - n + 1 keys): packed (equal n-grams, equal keys, in any
    sequence of the vocabulary) when the vocabulary allows (:func:`packs`), else :func:`ngram_codes`."""
    if not packs(vocabulary_size):
        yield from ngram_codes(codes)
        return
    grams = codes
    yield grams
    for n in range(1, NGRAM_ORDER):
        grams = grams[:-1] * vocabulary_size + codes[n:]
        yield grams


def ngram_codes(codes: np.ndarray) -> Iterator[np.ndarray]:
    """For n = 1..4 in turn, a compact code (0..k-1, k = #distinct n-grams) of the n-gram starting at each position
    of the int64 code sequence, n-grams spanning list boundaries included (len(codes) - n + 1 codes). Each is made
    from the one before as it is asked for, so a caller that reads them in turn holds two, not four."""
    base = int(codes.max()) + 1 if len(codes) else 1
    grams = codes
    yield grams
    for n in range(1, NGRAM_ORDER):
        # the (n+1)-gram at p is the n-gram at p followed by the token at p + n; codes < len(codes), so the
        # pair code stays below len(codes)**2 and fits int64
        grams = pd.factorize(grams[:-1] * base + codes[n:])[0].astype(np.int64, copy=False)
        yield grams


class DistinctKeys:
    """The distinct keys of arrays added one at a time: each array's distinct keys are kept, and merged with those
    kept before once they are as many (so each key is hashed a bounded number of times on average)."""

    def __init__(self) -> None:
        self._merged = np.zeros(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_size = 0

    def add(self, keys: np.ndarray) -> None:
        """Keep the distinct keys of ``keys``."""
        distinct = pd.unique(keys)
        self._pending.append(distinct)
        self._pending_size += len(distinct)
        if self._pending_size >= len(self._merged):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._merged = pd.unique(np.concatenate([self._merged, *self._pending]))
            self._pending, self._pending_size = [], 0

    def __len__(self) -> int:
        """The number of distinct keys added."""
        self._merge()
        return len(self._merged)


def ngram_diversity_of_units(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int = TOKENS_AT_ONCE) -> float:
    """N-gram diversity, Appendix C.3: NGD(D) = Σ_{n=1..4} #unique n-grams in D⊕ / #n-grams in D⊕, of the units
    ``ids`` (ascending) of ``coded``, their words taken about ``tokens_at_once`` tokens at a time.

    D⊕ is the dataset "concatenated into a single string": the units' word lists are joined into one
    sequence, in the order given, and n-grams are counted over it, so an n-gram may span two units (and two
    slices: each slice's words follow the last three of the one before). Units are the distinct contexts of a
    group, tokens their words (punctuation out, stop words kept: a language's ``words``). Ranges over (0, 4]. NaN
    when D⊕ has fewer than 4 words (a ratio is 0/0).
    """
    vocabulary_size = len(coded.stop)
    distinct = [DistinctKeys() for _ in range(NGRAM_ORDER)]
    counts = [0] * NGRAM_ORDER
    before = np.zeros(0, dtype=np.int64)  # the last words of the slices before, for n-grams across a cut
    for units in unit_slices(coded, ids, tokens_at_once):
        words = np.concatenate([before, coded.words_of(coded.codes_of(units)[0])])
        for n, keys in enumerate(ngram_keys(words, vocabulary_size), start=1):
            new = keys[max(len(before) - n + 1, 0) :]  # those that end in this slice
            distinct[n - 1].add(new)
            counts[n - 1] += len(new)
        before = words[max(len(words) - (NGRAM_ORDER - 1), 0) :]
    if counts[-1] == 0:
        return math.nan
    ngd = 0.0
    for found, count in zip(distinct, counts, strict=True):
        ngd += len(found) / count  # added in turn: Python's sum() of floats compensates its rounding (3.12)
    return ngd


def type_token_ratio_of_units(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int = TOKENS_AT_ONCE) -> float:
    """Type-token ratio, Appendix C.2: #unique words / #words of T, stop words removed, of the units ``ids`` of
    ``coded``, taken about ``tokens_at_once`` tokens at a time.

    T is all units of a group taken together (the distinct contexts' words, punctuation out); the stop words are
    those ``coded`` marks (its language's ``stop_words``). NaN when no word is left.
    """
    seen = np.zeros(len(coded.stop), dtype=bool)
    kept = 0
    for units in unit_slices(coded, ids, tokens_at_once):
        words = coded.words_of(coded.codes_of(units)[0])
        words = words[~coded.stop[words]]
        seen[words] = True
        kept += len(words)
    return int(seen.sum()) / kept if kept else math.nan
