"""The translate stage's chrF of all segments at once is sacrebleu's sentence chrF of each, to the last bit."""

from __future__ import annotations

import random

import pytest
from sacrebleu.metrics import CHRF

from pbbq.tasks.translate.chrf import chrf_scores


def test_chrf_of_many_pairs_is_sacrebleus_sentence_score_of_each() -> None:
    """Random Persian and English texts (more than one chunk) with spaces, a zero-width non-joiner and punctuation,
    and the edge cases: empty texts, whitespace only, shorter than the six orders, identical, outside the BMP."""
    rng = random.Random(7)
    alphabet = "ab cد رستاینآ\u200c.،x"

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))

    pairs = [(text(), text()) for _ in range(2100)]  # more than one chunk of CHUNK pairs
    pairs += [("", ""), ("a", ""), ("", "a"), ("   ", "xy"), ("کرد راننده", "کرد راننده"), ("😀😀ab", "😀ab")]
    metric = CHRF()
    expected = [metric.sentence_score(hypothesis, [reference]).score for hypothesis, reference in pairs]
    assert chrf_scores([h for h, _ in pairs], [r for _, r in pairs]) == expected


def test_chrf_needs_one_reference_per_hypothesis() -> None:
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        chrf_scores(["a", "b"], ["a"])


def test_chrf_calls_no_private_sacrebleu_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only sacrebleu's public API: with its private per-sentence scorer gone, the scores are still its own."""
    pairs = [("کرد راننده", "کرد رانندگی"), ("abc def", "abd cef"), ("", "a"), ("ab", "ab")]
    expected = [CHRF().sentence_score(hypothesis, [reference]).score for hypothesis, reference in pairs]
    monkeypatch.delattr(CHRF, "_compute_f_score")
    assert chrf_scores([h for h, _ in pairs], [r for _, r in pairs]) == expected
