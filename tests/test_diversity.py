"""Diversity metrics (PBBQ Appendix C): hand-computed cases, Self-BLEU against sacrebleu's sentence_bleu,
BERTScore homogenization against bert_score.score, and the Table 2 report."""

import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pbbq.tasks.diversity import (
    HomogenizationResult,
    _closest_other_lengths,
    _pair_f1,
    _pairs,
    _sentence_bleu_scores,
    diversity_table,
    homogenization_bertscore,
    mask_placeholders,
    ngram_diversity,
    plot_metric_bars,
    self_bleu,
    table2_markdown,
    template_diversity_table,
    template_units,
    type_token_ratio,
)
from pbbq.tasks.persian_text import stop_words, tokenize_fa, words
from sacrebleu import sentence_bleu

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
    units = [words(tokenize_fa("پدر به مدرسه رفت."), "fa"), words(tokenize_fa("مادر به مدرسه رفت."), "fa")]
    # hazm's list holds 'به' and 'رفت': پدر مدرسه مادر مدرسه -> 3 types / 4 tokens; nothing removed: 5 / 8
    assert {"به", "رفت"} <= stop_words("fa") and "مدرسه" not in stop_words("fa")
    assert type_token_ratio(units, stop_words("fa")) == pytest.approx(3 / 4, abs=1e-12)
    assert type_token_ratio(units, frozenset()) == pytest.approx(5 / 8, abs=1e-12)


# ------------------------------------------------------------------------------------------------ Self-BLEU


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


def _reference_scores(hypotheses: list[str], tokenize_mode: str) -> np.ndarray:
    """The definition: sacrebleu's sentence_bleu of each sentence against all the others."""
    return np.array(
        [
            sentence_bleu(h, hypotheses[:i] + hypotheses[i + 1 :], tokenize=tokenize_mode).score
            for i, h in enumerate(hypotheses)
        ]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_bleu_equals_sacrebleu_on_persian(seed: int) -> None:
    vocab = ["پدر", "مادر", "به", "مدرسه", "رفت", "و", "می\u200cرود", "علی", "دیروز", "،", "."]
    sentences = _random_sentences(vocab, seed)
    joined = [" ".join(tokenize_fa(sentence)) for sentence in sentences]
    reference = _reference_scores(joined, "none")
    assert np.abs(_sentence_bleu_scores([tokenize_fa(s) for s in sentences]) - reference).max() < 1e-9
    assert self_bleu(sentences, tokenize=tokenize_fa) == pytest.approx(reference.mean() / 100, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_bleu_equals_sacrebleu_on_english(seed: int) -> None:
    vocab = ["the", "nurse", "doctor", "said,", "left.", "can't", "It", "was", '"late"', "3.5", "and"]
    sentences = _random_sentences(vocab, seed)
    reference = _reference_scores(sentences, "13a")  # sacrebleu's default tokenizer on the raw text
    assert self_bleu(sentences) == pytest.approx(reference.mean() / 100, abs=1e-9)


# ------------------------------------------------------------------------------- BERTScore homogenization

SENTENCES = [
    "پدر علی دیروز به مدرسه رفت",
    "مادر زهرا امروز به بازار رفت",
    "مرد جوان کارمند دولت است",
    "زن پیر در روستا زندگی می\u200cکند",
    "پسر کوچک با دوستش بازی کرد",
    "دختر دانشجو کتاب تازه‌ای خرید",
    "پدر علی دیروز به مدرسه رفت و برگشت",
    "the nurse said the doctor was late",
    "a young man works for the government",
    "an old woman lives in the village",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT saved on disk (skipped only when the homogenization extra is not installed, or outside
    the repository: mutation testing's scratch copy holds no benchmarks/)."""
    for module in ("torch", "transformers", "tokenizers", "bert_score"):
        pytest.importorskip(module)
    build_tiny_bert = pytest.importorskip("benchmarks.homogenization").build_tiny_bert

    return str(build_tiny_bert(SENTENCES, tmp_path_factory.mktemp("tiny_bert")))


def _bert_score_mean(model: str, first: np.ndarray, second: np.ndarray) -> float:
    from bert_score import score

    cands, refs = [SENTENCES[i] for i in first], [SENTENCES[j] for j in second]
    _, _, f1 = score(cands, refs, model_type=model, num_layers=2, idf=False, rescale_with_baseline=False, device="cpu")
    return float(f1.double().mean())


def test_homogenization_equals_bert_score_on_all_pairs(tiny_model: str) -> None:
    result = homogenization_bertscore(SENTENCES, tiny_model, num_layers=2, batch_size=4, max_pairs=1000)
    first, second = np.triu_indices(len(SENTENCES), 1)
    assert result.computed and result.n_pairs == result.n_pairs_total == 45
    assert result.value == pytest.approx(_bert_score_mean(tiny_model, first, second), abs=1e-4)
    # bert-score's F1 is symmetric, so the ordered pairs d != d' of C.4 give the same mean
    assert result.value == pytest.approx(_bert_score_mean(tiny_model, second, first), abs=1e-4)
    assert result.note == f"BERTScore F1, {tiny_model} layer 2, all 45 pairs"


def test_homogenization_samples_pairs_with_the_seed(tiny_model: str) -> None:
    result = homogenization_bertscore(SENTENCES, tiny_model, num_layers=2, batch_size=8, max_pairs=20, seed=7)
    first, second = _pairs(len(SENTENCES), 20, seed=7)
    assert (result.n_pairs, result.n_pairs_total, result.seed) == (20, 45, 7)
    assert result.value == pytest.approx(_bert_score_mean(tiny_model, first, second), abs=1e-4)
    assert "20 of 45 pairs sampled (seed 7)" in result.note
    again = homogenization_bertscore(SENTENCES, tiny_model, num_layers=2, max_pairs=20, seed=7)
    assert again.value == result.value


def test_pair_f1_is_symmetric_and_zero_for_an_empty_text(tiny_model: str) -> None:
    from pbbq.tasks.diversity import _embed, _scorer_or_reason

    scorer = _scorer_or_reason(tiny_model, 2, 4, "cpu")
    embedded = _embed([*SENTENCES[:3], ""], scorer)
    first, second = np.array([0, 1, 0, 3]), np.array([1, 0, 3, 3])
    f1 = _pair_f1(embedded, first, second, batch_size=3)
    assert f1[0] == pytest.approx(f1[1], abs=1e-6)
    assert 0 < f1[0] < 1
    assert f1[2] == 0.0 and f1[3] == 0.0


def test_padding_never_changes_a_pairs_score() -> None:
    torch = pytest.importorskip("torch")
    # hand-made unit vectors: text 0 is (1, 0), text 1 is (-1, 0), text 2 is three tokens (0, 1) of weight 1/3
    vectors = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    embedded = (vectors, torch.tensor([0, 1, 2]), torch.tensor([1, 1, 3]), torch.tensor([1.0, 1.0, *[1 / 3] * 3]))
    # pair (0, 1): cosine -1, so P = R = -1 and F = 2 * 1 / -2 = -1, alone or padded to width 3 beside (2, 2)
    alone = _pair_f1(embedded, np.array([0]), np.array([1]), batch_size=1)
    padded = _pair_f1(embedded, np.array([0, 2]), np.array([1, 2]), batch_size=2)
    assert alone[0] == pytest.approx(-1.0) and padded[0] == pytest.approx(-1.0)
    assert padded[1] == pytest.approx(1.0)


def test_sampled_pairs_are_distinct_pairs_of_the_upper_triangle() -> None:
    first, second = _pairs(50, 1224, seed=3)  # 1225 pairs in all, one left out
    assert len(set(zip(first.tolist(), second.tolist(), strict=True))) == 1224
    assert (first < second).all() and first.min() >= 0 and second.max() <= 49
    assert not np.array_equal(_pairs(50, 100, seed=3)[0], _pairs(50, 100, seed=4)[0])
    all_first, all_second = _pairs(4, 6, seed=0)
    assert list(zip(all_first.tolist(), all_second.tolist(), strict=True)) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 2),
        (1, 3),
        (2, 3),
    ]


def test_homogenization_not_computed_when_the_model_is_missing(tmp_path: Path) -> None:
    result = homogenization_bertscore(SENTENCES, str(tmp_path / "no-such-model"), num_layers=2)
    assert isinstance(result, HomogenizationResult)
    assert not result.computed and math.isnan(result.value) and result.n_pairs == 0
    assert "no-such-model" in result.reason and result.note.startswith("not computed: ")


def test_homogenization_not_computed_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bert_score", None)
    monkeypatch.setitem(sys.modules, "bert_score.utils", None)
    result = homogenization_bertscore(SENTENCES, "sbunlp/fabert", num_layers=9)
    assert not result.computed and math.isnan(result.value)
    assert "extra" in result.reason


# ------------------------------------------------------------------------------------ template texts, masked


def test_placeholders_become_one_neutral_word() -> None:
    text = "یک {stereo} و یک {nonstereo} در صف {lex} منتظر بودند."
    assert mask_placeholders(text, where="t") == "یک فلانی و یک فلانی در صف فلانی منتظر بودند."
    assert mask_placeholders("بی‌نشانگر", where="t") == "بی‌نشانگر"


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{Nonstereo} رفت", "unknown placeholder '{Nonstereo}'"), ("{stereo} رفت}", "unmatched brace")],
)
def test_an_unknown_placeholder_names_the_template_and_column(text: str, problem: str) -> None:
    templates = pd.DataFrame([_template_row("AGE-01-T1", "Age", "{stereo} و {nonstereo}", text, "{nonstereo} رفت")])
    with pytest.raises(ValueError, match=re.escape(problem)) as error:
        template_units(templates)
    assert "template 'AGE-01-T1', column 'disambiguated_fa'" in str(error.value)
    assert "04_disambiguate templates" in str(error.value)


def _template_row(
    template_id: str,
    category: str,
    ambiguous: str,
    biased: str,
    counter: str,
    *,
    source: str = "llm",
    counter_source: str = "mirror",
) -> dict[str, str]:
    """A row of the 04_disambiguate templates table, with the columns the diversity stage reads."""
    return {
        "template_id": template_id,
        "stereotype_id": template_id[:-3],
        "category": category,
        "ambiguous_fa": ambiguous,
        "disambiguated_fa": biased,
        "disambiguated_counter_biased_fa": counter,
        "disambiguated_source": source,
        "counter_biased_source": counter_source,
    }


def _templates() -> pd.DataFrame:
    """Age: one template whose counter-biased text is the mirror (one unit once masked) and one in review
    (left out, its stray placeholder never read); Gender: a mirror exception (3 units); Religion: texts equal
    to Age's and Gender's (the Overall row counts each text once)."""
    return pd.DataFrame(
        [
            _template_row(
                "AGE-01-T1",
                "Age",
                "{stereo} و {nonstereo} در پارک بودند",
                "{stereo} در پارک خندید",
                "{nonstereo} در پارک خندید",
            ),
            _template_row("AGE-02-T1", "Age", "{stereo} و {nonstereo}", "{Nonstereo} رفت", "", source="review"),
            _template_row(
                "GEN-01-T1",
                "Gender",
                "{stereo} کتاب خرید",
                "{stereo} دوید",
                "{nonstereo} نشستند",
                source="human",
                counter_source="human",
            ),
            _template_row(
                "REL-01-T1", "Religion", "{nonstereo} و {stereo} در پارک بودند", "{stereo} دوید", "{nonstereo} دوید"
            ),
            _template_row(
                "REL-02-T1", "Religion", "{stereo} آمد", "{stereo} ماند", "{nonstereo} ماند", counter_source="review"
            ),
        ]
    )


def test_template_units_mask_every_text_of_the_templates_out_of_review() -> None:
    units = template_units(_templates())
    assert units["template_id"].tolist() == ["AGE-01-T1"] * 3 + ["GEN-01-T1"] * 3 + ["REL-01-T1"] * 3
    assert units["column"].tolist() == ["ambiguous_fa", "disambiguated_fa", "disambiguated_counter_biased_fa"] * 3
    assert units["text"].tolist() == [
        "فلانی و فلانی در پارک بودند",
        "فلانی در پارک خندید",
        "فلانی در پارک خندید",
        "فلانی کتاب خرید",
        "فلانی دوید",
        "فلانی نشستند",
        "فلانی و فلانی در پارک بودند",
        "فلانی دوید",
        "فلانی دوید",
    ]


def test_template_units_reject_an_empty_text_and_missing_columns() -> None:
    empty = pd.DataFrame([_template_row("AGE-01-T1", "Age", "{stereo} و {nonstereo}", "", "")])
    with pytest.raises(ValueError, match="template 'AGE-01-T1', column 'disambiguated_fa': empty"):
        template_units(empty)
    with pytest.raises(ValueError, match="counter_biased_source"):
        template_units(_templates().drop(columns="counter_biased_source"))


def _bleu(precisions: list[float], sys_len: int, ref_len: int) -> float:
    """BLEU (0-100) from its n-gram precisions (in %), with the brevity penalty of Papineni et al."""
    penalty = 1.0 if sys_len > ref_len else math.exp(1 - ref_len / sys_len)
    return penalty * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


def _reference_ngd(token_lists: list[list[str]]) -> float:
    """C.3 written out: Σ_{n=1..4} #unique n-grams / #n-grams of the concatenated token lists."""
    tokens = [token for tokens in token_lists for token in tokens]
    grams = [[tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)] for n in range(1, 5)]
    return sum(len(set(g)) / len(g) for g in grams)


# The expected values below are worked by hand from the masked texts; NEUTRAL = فلانی, stop words و در بودند.
# Age, units sorted: A = فلانی در پارک خندید, B = فلانی و فلانی در پارک بودند.
AGE_NGD = 6 / 10 + 7 / 9 + 7 / 8 + 7 / 7  # D⊕ = A B: 6 types of 10; 2-grams 'فلانی در', 'در پارک' twice
AGE_TTR = 2 / 3  # stop words and فلانی out: پارک خندید پارک
# A against B: p1 3/4 (فلانی clipped to 1), p2 2/3, p3 1/2, p4 0/1 -> 100 / (2 * 1); BP exp(1 - 6/4).
# B against A: p1 3/6 (فلانی's 3 clipped to A's 1), p2 2/5, p3 1/4, p4 0/3 -> 100 / (2 * 3); BP 1.
AGE_SELF_BLEU = (_bleu([75, 200 / 3, 50, 50], 4, 6) + _bleu([50, 40, 25, 100 / 6], 6, 4)) / 200
# Gender, sorted: فلانی دوید, فلانی نشستند, فلانی کتاب خرید (the mirror exception: 3 units)
GENDER_NGD = 5 / 7 + 1 + 1 + 1
GENDER_TTR = 1.0  # دوید نشستند کتاب خرید
# the two 2-word units: p1 1/2, p2 0/1 -> 50, order 2 -> 50 each; the 3-word one: p1 1/3, p2 0/2 -> 25,
# p3 0/1 -> 100 / (4 * 1) = 25, order 3, BP 1 (closest other length 2 < 3)
GENDER_SELF_BLEU = (50 + 50 + (100 / 3 * 25 * 25) ** (1 / 3)) / 300


def test_template_table_on_hand_computed_texts() -> None:
    table = template_diversity_table(_templates(), homogenization_model=None)
    assert list(table.columns) == [
        "category",
        "n_templates",
        "n_units",
        "ngd",
        "ngd_mean",
        "ttr",
        "self_bleu",
        "homogenization",
        "homogenization_note",
    ]
    assert table["category"].tolist() == ["Age", "Gender", "Religion", "Average", "Overall"]
    rows = table.set_index("category")
    assert rows["n_templates"].tolist() == [1, 1, 1, 3, 3]
    assert rows["n_units"].tolist() == [2, 3, 2, 7, 5]  # Overall: 5 distinct texts of the 7

    assert rows.loc["Age", "ngd"] == pytest.approx(AGE_NGD, abs=1e-12)
    assert rows.loc["Age", "ngd_mean"] == pytest.approx(AGE_NGD / 4, abs=1e-12)
    assert rows.loc["Age", "ttr"] == pytest.approx(AGE_TTR, abs=1e-12)
    assert rows.loc["Age", "self_bleu"] == pytest.approx(AGE_SELF_BLEU, abs=1e-12)
    assert rows.loc["Gender", "ngd"] == pytest.approx(GENDER_NGD, abs=1e-12)
    assert rows.loc["Gender", "ttr"] == pytest.approx(GENDER_TTR, abs=1e-12)
    assert rows.loc["Gender", "self_bleu"] == pytest.approx(GENDER_SELF_BLEU, abs=1e-12)
    # Religion: فلانی دوید, فلانی و فلانی در پارک بودند -> TTR دوید پارک = 1
    assert rows.loc["Religion", "ttr"] == pytest.approx(1.0, abs=1e-12)

    for metric in ("ngd", "ngd_mean", "ttr", "self_bleu"):
        assert rows.loc["Average", metric] == pytest.approx(rows.loc[["Age", "Gender", "Religion"], metric].mean())
    overall = sorted(
        ["فلانی در پارک خندید", "فلانی و فلانی در پارک بودند", "فلانی کتاب خرید", "فلانی دوید", "فلانی نشستند"]
    )
    assert rows.loc["Overall", "ttr"] == pytest.approx(6 / 7, abs=1e-12)  # پارک خندید پارک کتاب خرید دوید نشستند
    assert rows.loc["Overall", "ngd"] == pytest.approx(_reference_ngd([s.split() for s in overall]), abs=1e-12)
    reference = _reference_scores(overall, "none")
    assert rows.loc["Overall", "self_bleu"] == pytest.approx(reference.mean() / 100, abs=1e-12)
    assert table["homogenization"].isna().all()
    assert (table["homogenization_note"] == "not computed: no homogenization model given for this language").all()


def test_units_are_concatenated_in_sorted_order_for_ngd() -> None:
    # masked: p q (the ambiguous text, first in the table) and q p q (both continuations), p = فلانی, q = دوید.
    # Sorted, q p q comes first ('د' < 'ف'): D⊕ = q p q p q -> 2/5 + 2/4 + 2/3 + 2/2; in table order it would
    # be p q q p q -> 2/5 + 3/4 + 3/3 + 2/2
    templates = pd.DataFrame(
        [_template_row("DIS-01-T1", "Disability", "{stereo} دوید", "دوید {stereo} دوید", "دوید {nonstereo} دوید")]
    )
    table = template_diversity_table(templates, homogenization_model=None).set_index("category")
    assert table.loc["Disability", "ngd"] == pytest.approx(2 / 5 + 2 / 4 + 2 / 3 + 2 / 2, abs=1e-12)


def test_template_table_ignores_row_order_and_rows_in_review() -> None:
    templates = _templates()
    table = template_diversity_table(templates, homogenization_model=None)
    shuffled = templates.sample(frac=1, random_state=3)
    pd.testing.assert_frame_equal(table, template_diversity_table(shuffled, homogenization_model=None))
    in_review = templates.assign(disambiguated_source="review")
    assert template_diversity_table(in_review, homogenization_model=None).empty


def test_template_table_with_a_model(tiny_model: str) -> None:
    table = template_diversity_table(_templates(), homogenization_model=tiny_model, homogenization_num_layers=2)
    rows = table.set_index("category")
    assert rows["homogenization"].notna().all()
    assert rows.loc["Average", "homogenization"] == pytest.approx(rows["homogenization"].iloc[:3].mean())
    assert rows.loc["Overall", "homogenization_note"] == f"BERTScore F1, {tiny_model} layer 2, all 10 pairs"
    assert rows.loc["Average", "homogenization_note"] == "mean of 3 of 3 categories"


# ------------------------------------------------------------------------------------------ instance level


def _examples() -> pd.DataFrame:
    """An example table: 2 categories; each context twice (negative and non-negative question); Persian
    originals, two name-proxy seeds and English translations."""
    fa = {
        "Age": ["پیرمرد و جوان در پارک بودند.", "پیرمرد و جوان در بازار بودند.", "جوان و پیرمرد در پارک بودند."],
        "Gender": ["مرد و زن در اداره کار می‌کنند.", "زن و مرد در اداره کار می‌کنند."],
    }
    names = {"Age": ["علی و رضا در پارک بودند."], "Gender": ["علی و مریم در اداره کار می‌کنند."]}
    en = {"Age": ["An old man and a young man were in the park."], "Gender": ["A man and a woman work there."]}
    rows = []
    for lang, variants in (("fa", {"original": fa, "names-7271": names, "names-861": names}), ("en", {"x": en})):
        for variant, by_category in variants.items():
            for category, contexts in by_category.items():
                for context in contexts:
                    for polarity in ("neg", "nonneg"):
                        rows.append(
                            {
                                "category": category,
                                "lang": lang,
                                "variant": "original" if lang == "en" else variant,
                                "context": context,
                                "context_condition": "ambig",
                                "question_polarity": polarity,
                            }
                        )
    return pd.DataFrame(rows)


def test_instance_table_rows_units_and_metrics() -> None:
    table = diversity_table(_examples(), homogenization_model=None)
    assert list(table.columns) == [
        "config",
        "category",
        "n_units",
        "ngd",
        "ngd_mean",
        "ttr",
        "self_bleu",
        "homogenization",
        "homogenization_note",
    ]
    assert table[["config", "category"]].values.tolist() == [
        [config, category]
        for config in ("fa", "fa-names", "en")
        for category in ("Age", "Gender", "Average", "Overall")
    ]
    fa = table[table["config"] == "fa"].set_index("category")
    assert fa["n_units"].tolist() == [3, 2, 5, 5]
    # the names config pools its seeds' distinct contexts: 1 per category, so Self-BLEU has no reference
    names = table[table["config"] == "fa-names"].set_index("category")
    assert names.loc["Age", "n_units"] == 1 and math.isnan(names.loc["Age", "self_bleu"])
    # Gender, fa, sorted: 'زن و مرد ...' before 'مرد و زن ...'; words زن و مرد در اداره کار می‌کنند twice, stop
    # words و در کار می‌کنند out (hazm) -> زن مرد اداره twice: 3 / 6
    assert fa.loc["Gender", "ttr"] == pytest.approx(3 / 6, abs=1e-12)
    gender = [s[:-1].split() for s in ("زن و مرد در اداره کار می‌کنند.", "مرد و زن در اداره کار می‌کنند.")]
    assert fa.loc["Gender", "ngd"] == pytest.approx(_reference_ngd(gender), abs=1e-12)
    for metric in ("ngd", "ttr", "self_bleu"):
        assert fa.loc["Average", metric] == pytest.approx((fa.loc["Age", metric] + fa.loc["Gender", metric]) / 2)
    everything = sorted({context for contexts in _examples_fa().values() for context in contexts})
    reference = _reference_scores([" ".join(tokenize_fa(s)) for s in everything], "none")
    assert fa.loc["Overall", "self_bleu"] == pytest.approx(reference.mean() / 100, abs=1e-12)
    en = table[table["config"] == "en"].set_index("category")
    # English is lowercased and NLTK's stop words go: old man young man park -> 4 / 5
    assert en.loc["Age", "ttr"] == pytest.approx(4 / 5, abs=1e-12)
    assert table["homogenization"].isna().all()
    assert table["homogenization_note"].str.startswith("not computed").all()


def _examples_fa() -> dict[str, list[str]]:
    frame = _examples().query("lang == 'fa' and variant == 'original'")
    return {str(k): sorted(set(v)) for k, v in frame.groupby("category")["context"]}


def test_instance_table_ignores_row_order_and_checks_columns() -> None:
    examples = _examples()
    shuffled = examples.sample(frac=1, random_state=5)
    pd.testing.assert_frame_equal(
        diversity_table(examples, homogenization_model=None), diversity_table(shuffled, homogenization_model=None)
    )
    with pytest.raises(ValueError, match="context"):
        diversity_table(examples.drop(columns="context"), homogenization_model=None)


def test_instance_table_with_a_model_per_language(tiny_model: str) -> None:
    table = diversity_table(_examples(), homogenization_model={"fa": tiny_model}, homogenization_num_layers=2)
    fa = table[table["config"] == "fa"].set_index("category")
    assert fa["homogenization"].notna().all()
    assert fa.loc["Average", "homogenization"] == pytest.approx(fa.loc[["Age", "Gender"], "homogenization"].mean())
    assert fa.loc["Overall", "homogenization_note"] == f"BERTScore F1, {tiny_model} layer 2, all 10 pairs"
    en = table[table["config"] == "en"]
    assert en["homogenization"].isna().all()
    assert "no homogenization model" in en["homogenization_note"].iloc[0]


# ----------------------------------------------------------------------------------------------- reporting


def test_markdown_of_both_levels() -> None:
    templates = template_diversity_table(_templates(), homogenization_model=None)
    markdown = table2_markdown(templates, "Template texts")
    assert markdown.startswith("## Template texts\n\n| Category | # templates | # units | NGD ↑ | NGD ÷ 4 ↑ | TTR ↑ |")
    assert "###" not in markdown
    assert (
        f"| Age | 1 | 2 | {AGE_NGD:.4f} | {AGE_NGD / 4:.4f} | {AGE_TTR:.4f} | {AGE_SELF_BLEU:.4f} | not computed |"
        in (markdown)
    )
    assert "| **Average** | **3** | **7** |" in markdown
    assert "- Age, Gender, Religion, Average, Overall: not computed: no homogenization model" in markdown

    instances = table2_markdown(diversity_table(_examples(), homogenization_model=None), "Instances")
    assert "### fa\n" in instances and "### fa-names\n" in instances and "### en\n" in instances
    assert "| Category | # units | NGD ↑ | NGD ÷ 4 ↑ | TTR ↑ | Self-BLEU ↓ | BERTScore ↓ |" in instances
    assert "| Gender | 2 | " in instances and "# templates" not in instances


def test_plots_of_both_levels(tmp_path: Path) -> None:
    metrics = ("ngd", "ttr", "self_bleu", "homogenization")
    for table, prefix in (
        (template_diversity_table(_templates(), homogenization_model=None), "diversity"),
        (diversity_table(_examples(), homogenization_model=None), "diversity_instances"),
    ):
        paths = plot_metric_bars(table, tmp_path / prefix / "a", prefix)
        assert [path.name for path in paths] == [f"{prefix}_{metric}.png" for metric in metrics]
        assert all(path.read_bytes().startswith(b"\x89PNG") for path in paths)
        again = plot_metric_bars(table, tmp_path / prefix / "b", prefix)
        assert [path.read_bytes() for path in paths] == [path.read_bytes() for path in again]
