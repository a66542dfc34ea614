"""The diversity metrics on texts coded once by a vocabulary (``CodedTexts``): each equals the metric on the
texts' own tokens and words, whatever order the units come in, so a table tokenises each text once and reuses it
for every group it measures."""

import math

import numpy as np

from pbbq.tasks.diversity.ngrams import (
    code_texts,
    code_token_lists,
    ngram_diversity_of_units,
    type_token_ratio_of_units,
)
from pbbq.tasks.diversity.self_bleu import self_bleu_of_tokens, self_bleu_of_units
from pbbq.tasks.text.languages import language
from tests.diversity_support import ngram_diversity, type_token_ratio

ENGLISH = [
    "The nurse said the doctor was late.",
    "the doctor said: The nurse was late!",
    "A nurse and a doctor were late, the nurse said.",
    "Nobody was late.",
]


def test_coded_metrics_equal_the_metrics_of_the_tokens() -> None:
    english = language("en")
    coded = code_texts(ENGLISH, english.tokenize, english.words, english.stop_words)
    assert len(coded) == 4
    for ids in ([0, 1, 2, 3], [1, 2], [0, 3]):
        units = [ENGLISH[i] for i in ids]
        tokens = [english.tokenize(unit) for unit in units]
        words = [english.words(unit_tokens) for unit_tokens in tokens]
        group = np.array(ids)
        assert ngram_diversity_of_units(coded, group) == ngram_diversity(words)
        assert type_token_ratio_of_units(coded, group) == type_token_ratio(words, english.stop_words)
        assert self_bleu_of_units(coded, group) == self_bleu_of_tokens(tokens)


def test_words_merge_case_and_leave_out_punctuation() -> None:
    english = language("en")
    coded = code_texts(["The cat.", "the CAT!", "The"], english.tokenize, english.words, frozenset({"the"}))
    assert coded.lengths(np.array([0, 1])).tolist() == [3, 3]  # The, cat, .
    first, second = (coded.words_of(coded.codes_of(np.array([unit]))[0]) for unit in (0, 1))
    assert first.tolist() == second.tolist()  # the, cat: one code each
    assert coded.stop.tolist() == [True, False]
    assert math.isnan(type_token_ratio_of_units(coded, np.array([2])))  # only a stop word


def test_codes_take_the_smallest_type_and_units_are_slices() -> None:
    coded = code_token_lists([["a", "b"], [], ["b", "c", "a"]])
    assert coded.tokens.dtype == np.uint8 and coded.starts.tolist() == [0, 2, 2, 5]
    codes, lengths = coded.codes_of(np.array([0, 2]))
    assert codes.dtype == np.int64 and codes.tolist() == [0, 1, 1, 2, 0] and lengths.tolist() == [2, 3]
    many = code_token_lists([[f"w{i}" for i in range(70_000)]])
    assert many.tokens.dtype == np.uint32 and many.codes_of(np.array([0]))[0][-1] == 69_999
    assert len(code_texts([], language("en").tokenize, language("en").words, frozenset())) == 0


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


def test_english_tokens_are_sacrebleus_and_no_line_is_kept() -> None:
    """sacrebleu's 13a tokenizer keeps the last 65,536 lines of each of its two steps for the whole process; the
    English tokens are its own, with no line kept (a config's contexts are tokenised once each)."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    from pbbq.tasks.text.languages.en import tokenize_en

    def kept() -> tuple[int, int]:
        return Tokenizer13a.__call__.cache_info().currsize, TokenizerRegexp.__call__.cache_info().currsize

    text = 'The "kept-lines" test: A &amp; B paid 3.5 or 1,000 dollars -- once.\n'
    before = kept()
    tokens = tokenize_en(text)
    assert kept() == before
    assert tokens == Tokenizer13a()(text.rstrip()).split()
