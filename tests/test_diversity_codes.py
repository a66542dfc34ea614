"""The diversity metrics on texts coded once by a vocabulary (``CodedTexts``): each equals the metric on the
texts' own tokens and words, whatever order the units come in, so a table tokenises each text once and reuses it
for every group it measures."""

import math

import numpy as np

from pbbq.tasks.diversity.ngrams import (
    code_texts,
    joined_codes,
    ngram_diversity_of_codes,
    token_codes,
    type_token_ratio_of_codes,
)
from pbbq.tasks.diversity.self_bleu import self_bleu_of_codes, self_bleu_of_tokens
from pbbq.tasks.text.languages import language
from tests.diversity_support import ngram_diversity, type_token_ratio

ENGLISH = [
    "The nurse said the doctor was late.",
    "the doctor said: The nurse was late!",
    "A nurse and a doctor were late, the nurse said.",
    "The nurse said the doctor was late.",  # a repeated text is coded once
    "Nobody was late.",
]


def test_coded_metrics_equal_the_metrics_of_the_tokens() -> None:
    english = language("en")
    coded = code_texts(ENGLISH, english.tokenize, english.words, english.stop_words)
    assert len(coded.tokens) == 4
    for units in (sorted(set(ENGLISH)), sorted(set(ENGLISH), reverse=True), ENGLISH[1:3]):
        tokens = [english.tokenize(unit) for unit in units]
        words = [english.words(unit_tokens) for unit_tokens in tokens]
        word_codes = [coded.words[unit] for unit in units]
        assert ngram_diversity_of_codes(joined_codes(word_codes)[0]) == ngram_diversity(words)
        assert type_token_ratio_of_codes(word_codes, coded.stop) == type_token_ratio(words, english.stop_words)
        token_codes_of_units = joined_codes([coded.tokens[unit] for unit in units])
        assert self_bleu_of_codes(*token_codes_of_units) == self_bleu_of_tokens(tokens)


def test_words_merge_case_and_leave_out_punctuation() -> None:
    english = language("en")
    coded = code_texts(["The cat.", "the CAT!"], english.tokenize, english.words, frozenset({"the"}))
    assert len(coded.tokens["The cat."]) == 3  # The, cat, .
    assert coded.words["The cat."].tolist() == coded.words["the CAT!"].tolist()  # the, cat: one code each
    assert coded.stop.tolist() == [True, False]
    assert math.isnan(type_token_ratio_of_codes([coded.words["The cat."][:1]], coded.stop))  # only a stop word


def test_joined_codes_are_token_codes() -> None:
    english = language("en")
    coded = code_texts(ENGLISH, english.tokenize, english.words, frozenset())
    units = sorted(set(ENGLISH))
    joined, lengths = joined_codes([coded.tokens[unit] for unit in units])
    expected, expected_lengths = token_codes([english.tokenize(unit) for unit in units])
    assert np.array_equal(joined, expected) and np.array_equal(lengths, expected_lengths)
    assert code_texts([], english.tokenize, english.words, frozenset()).tokens == {}


def test_the_persian_tokenizer_reads_no_word_list_and_gives_hazms_tokens() -> None:
    """The word list of hazm's WordTokenizer serves only to join verb parts, which the diversity tokens leave
    apart: the tokenizer is built without it, and gives what hazm's own gives."""
    from hazm import WordTokenizer

    from pbbq.tasks.text.languages.fa import _hazm_tokenizer

    ours, hazms = _hazm_tokenizer(), WordTokenizer(join_verb_parts=False)
    assert ours.words == {}
    texts = [
        "گفته شده است که او فردا خواهد رفت.",
        "پرستار گفت: «دکتر دیر آمد»؛ آیا درست است؟!",
        "در سال ۱۴۰۲ و 3.5 درصد (تقریباً) نمی‌دانستند...",
        "علی و مریم به خانه رفته بودند، اما کسی نبود",
    ]
    assert [ours.tokenize(text) for text in texts] == [hazms.tokenize(text) for text in texts]
