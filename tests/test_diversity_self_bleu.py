"""Self-BLEU (PBBQ Appendix C.1): hand-computed cases, and equal to sacrebleu's sentence_bleu of every sentence
against all the others, on Persian and English."""

import math

import numpy as np
import pytest

from pbbq.tasks.diversity import self_bleu as self_bleu_module
from pbbq.tasks.diversity.self_bleu import _closest_other_lengths, _sentence_bleu_scores, self_bleu
from pbbq.tasks.text.languages.en import tokenize_en
from pbbq.tasks.text.languages.fa import tokenize_fa
from tests.diversity_support import reference_bleu_scores


def test_self_bleu_hand_computed() -> None:
    # 'a b' vs 'a c': p1 = 1/2 -> 50; p2 has no match -> exp smoothing 100 / (2 * 1) = 50; effective order 2,
    # lengths equal so BP = 1: BLEU = 50 for both -> 0.5
    assert self_bleu(["a b", "a c"]) == pytest.approx(0.5, abs=1e-12)
    # identical sentences: BLEU 100 each -> 1.0
    assert self_bleu(["a b c d", "a b c d"]) == pytest.approx(1.0, abs=1e-12)
    # 'a' vs 'a b c': p1 = 100, order 1, BP = exp(1 - 3/1) -> 100 e^-2 = 13.5335;
    # 'a b c' vs 'a': p1 = 100/3, p2 = 100/(2*2) = 25, p3 = 100/(4*1) = 25, order 3, BP = 1
    # -> (100/3 * 25 * 25)^(1/3) = 27.5161; mean / 100 = 0.2052479
    expected = (100 * math.exp(-2) + (100 / 3 * 25 * 25) ** (1 / 3)) / 200
    assert self_bleu(["a", "a b c"]) == pytest.approx(expected, abs=1e-12)


def test_self_bleu_clips_against_the_largest_count_of_the_other_sentences() -> None:
    # 'x x' holds the largest count of x (2) alone, so it is clipped by the next largest, 1 ('x'): p1 = 1/2,
    # p2 = 100/(2*1) = 50 -> 50. 'x' is clipped by 2 ('x x'): p1 = 100, order 1, closest ref length 1 -> 100.
    # 'y' matches nothing -> 0. Mean 50 -> 0.5
    assert self_bleu(["x x", "x", "y"]) == pytest.approx(0.5, abs=1e-12)


def test_self_bleu_undefined_below_two_units_and_zero_for_empty_ones() -> None:
    assert math.isnan(self_bleu([]))
    assert math.isnan(self_bleu(["only one"]))
    assert self_bleu(["", ""]) == 0.0


def test_closest_reference_length_of_the_other_sentences() -> None:
    # [3, 2, 4, 3, 0]: each 3 has another 3; 2 -> 3 (closer than 0); 4 -> 3; 0 -> 2
    assert _closest_other_lengths(np.array([3, 2, 4, 3, 0])).tolist() == [3, 3, 3, 3, 2]
    # 5 is 1 away from both 4 and 6: the shorter wins
    assert _closest_other_lengths(np.array([5, 4, 6])).tolist() == [4, 5, 5]
    # long units: the longest has no longer neighbour, the shortest no shorter one, whatever their length
    assert _closest_other_lengths(np.array([100, 250, 400])).tolist() == [250, 100, 250]


def _random_sentences(vocab: list[str], seed: int, n: int = 60) -> list[str]:
    """n sentences of 0-12 words from a small vocabulary, with exact duplicates, one-word and empty ones."""
    rng = np.random.default_rng(seed)
    sentences = [" ".join(rng.choice(vocab, size=rng.integers(2, 13))) for _ in range(n - 8)]
    return [*sentences, sentences[0], sentences[0], sentences[5], vocab[0], vocab[1], vocab[0], "", ""]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_bleu_equals_sacrebleu_on_persian(seed: int) -> None:
    vocab = ["پدر", "مادر", "به", "مدرسه", "رفت", "و", "می\u200cرود", "علی", "دیروز", "،", "."]
    sentences = _random_sentences(vocab, seed)
    joined = [" ".join(tokenize_fa(sentence)) for sentence in sentences]
    reference = reference_bleu_scores(joined, "none")
    assert np.abs(_sentence_bleu_scores([tokenize_fa(s) for s in sentences]) - reference).max() < 1e-9
    assert self_bleu(sentences, tokenize=tokenize_fa) == pytest.approx(reference.mean() / 100, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_bleu_equals_sacrebleu_on_english(seed: int) -> None:
    vocab = ["the", "nurse", "doctor", "said,", "left.", "can't", "It", "was", '"late"', "3.5", "and"]
    sentences = _random_sentences(vocab, seed)
    reference = reference_bleu_scores(sentences, "13a")  # sacrebleu's default tokenizer on the raw text
    assert self_bleu(sentences) == pytest.approx(reference.mean() / 100, abs=1e-9)


@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_self_bleu_hashed_a_slice_of_units_at_a_time_is_the_same(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The (n-gram, unit) counts are hashed about PAIR_CHUNK n-grams at a time, cut between units: any cut (one
    unit per slice, slices of several units, a unit longer than a slice) gives sacrebleu's scores."""
    vocab = ["the", "nurse", "doctor", "said,", "left.", "can't", "It", "was", '"late"', "3.5", "and"]
    sentences = _random_sentences(vocab, 3)
    reference = reference_bleu_scores(sentences, "13a")
    monkeypatch.setattr(self_bleu_module, "PAIR_CHUNK", chunk)
    tokens = [tokenize_en(sentence) for sentence in sentences]
    assert np.abs(_sentence_bleu_scores(tokens) - reference).max() < 1e-9
