"""N-gram diversity (PBBQ Appendix C.3) and the type-token ratio (C.2): hand-computed cases."""

import math

import pytest

from pbbq.tasks.text.languages import language
from tests.diversity_support import ngram_diversity, type_token_ratio

# ------------------------------------------------------------------------------------------------------ NGD


def test_ngd_hand_computed() -> None:
    # D⊕ = a b a b c: 1-grams 3 unique of 5, 2-grams {ab, ba, bc} of 4 (ab twice), 3-grams aba bab abc 3 of 3,
    # 4-grams abab babc 2 of 2 -> 0.6 + 0.75 + 1 + 1 = 3.35
    assert ngram_diversity([["a", "b"], ["a", "b", "c"]]) == pytest.approx(3.35, abs=1e-12)


def test_ngd_counts_ngrams_across_unit_boundaries() -> None:
    # four one-word units concatenate to 'a a a a': 1/4 + 1/3 + 1/2 + 1/1 = 2.08333...; counted inside units
    # only there would be no 2-gram at all
    assert ngram_diversity([["a"], ["a"], ["a"], ["a"]]) == pytest.approx(1 / 4 + 1 / 3 + 1 / 2 + 1, abs=1e-12)


def test_ngd_all_distinct_is_four_and_short_text_is_nan() -> None:
    assert ngram_diversity([["w1", "w2"], ["w3", "w4", "w5"]]) == pytest.approx(4.0)
    assert math.isnan(ngram_diversity([["a", "b"], ["c"]]))  # 3 tokens: no 4-gram
    assert math.isnan(ngram_diversity([]))


# ------------------------------------------------------------------------------------------------------ TTR


def test_ttr_hand_computed_without_stop_words() -> None:
    # 'the' removed: cat sat cat -> 2 types / 3 tokens
    assert type_token_ratio([["the", "cat", "sat"], ["the", "cat"]], frozenset({"the"})) == pytest.approx(2 / 3)
    # with nothing removed: the cat sat the cat -> 3 / 5
    assert type_token_ratio([["the", "cat", "sat"], ["the", "cat"]], frozenset()) == pytest.approx(3 / 5)
    assert math.isnan(type_token_ratio([["the"], ["the"]], frozenset({"the"})))


def test_ttr_uses_persian_stop_words() -> None:
    persian = language("fa")
    units = [persian.words(persian.tokenize(text)) for text in ("پدر به مدرسه رفت.", "مادر به مدرسه رفت.")]
    # hazm's list holds 'به' and 'رفت': پدر مدرسه مادر مدرسه -> 3 types / 4 tokens; nothing removed: 5 / 8
    assert {"به", "رفت"} <= persian.stop_words and "مدرسه" not in persian.stop_words
    assert type_token_ratio(units, persian.stop_words) == pytest.approx(3 / 4, abs=1e-12)
    assert type_token_ratio(units, frozenset()) == pytest.approx(5 / 8, abs=1e-12)
