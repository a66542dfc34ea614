"""Diversity metrics (PBBQ Appendix C): hand-computed cases, Self-BLEU against sacrebleu's sentence_bleu,
BERTScore homogenization against bert_score.score, and the Table 2 report."""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sacrebleu import sentence_bleu

from tasks.diversity import (
    HomogenizationResult,
    _closest_other_lengths,
    _pair_f1,
    _pairs,
    _sentence_bleu_scores,
    diversity_table,
    homogenization_bertscore,
    ngram_diversity,
    plot_metric_bars,
    self_bleu,
    table2_markdown,
    type_token_ratio,
)
from tasks.persian_text import stop_words, tokenize, tokenize_fa, words

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
    # 'به' is a stop word: پدر مدرسه رفت مادر مدرسه رفت -> 4 types / 6 tokens ('رفت' is kept by hazm's list)
    kept = [token for unit in units for token in unit if token not in stop_words("fa")]
    assert type_token_ratio(units, stop_words("fa")) == pytest.approx(len(set(kept)) / len(kept))
    assert "به" not in kept and "مدرسه" in kept


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
    """A tiny random BERT saved on disk (skipped only when the homogenization extra is not installed)."""
    for module in ("torch", "transformers", "tokenizers", "bert_score"):
        pytest.importorskip(module)
    from benchmarks.homogenization import build_tiny_bert

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
    from tasks.diversity import _embed, _scorer_or_reason

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


# ------------------------------------------------------------------------------------------------ Table 2


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


def test_diversity_table_rows_units_and_metrics() -> None:
    table = diversity_table(_examples(), homogenization_model=None)
    assert list(table.columns) == [
        "config",
        "category",
        "n_units",
        "ngd",
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
    assert fa.loc["Age", "n_units"] == 3 and fa.loc["Gender", "n_units"] == 2 and fa.loc["Overall", "n_units"] == 5
    # the names config pools its seeds' distinct contexts: 1 per category
    assert table[(table["config"] == "fa-names") & (table["category"] == "Age")]["n_units"].item() == 1

    age = sorted(_examples().query("lang == 'fa' and variant == 'original' and category == 'Age'")["context"].unique())
    age_words = [words(tokenize(unit, "fa"), "fa") for unit in age]
    assert fa.loc["Age", "ngd"] == pytest.approx(ngram_diversity(age_words))
    assert fa.loc["Age", "ttr"] == pytest.approx(type_token_ratio(age_words, stop_words("fa")))
    assert fa.loc["Age", "self_bleu"] == pytest.approx(self_bleu(age, tokenize=tokenize_fa))
    for metric in ("ngd", "ttr", "self_bleu"):
        assert fa.loc["Average", metric] == pytest.approx((fa.loc["Age", metric] + fa.loc["Gender", metric]) / 2)
    everything = sorted(_examples().query("lang == 'fa' and variant == 'original'")["context"].unique())
    assert fa.loc["Overall", "self_bleu"] == pytest.approx(self_bleu(everything, tokenize=tokenize_fa))
    assert math.isnan(table[table["config"] == "fa-names"].set_index("category").loc["Age", "self_bleu"])
    assert table["homogenization"].isna().all()
    assert table["homogenization_note"].str.startswith("not computed").all()


def test_diversity_table_ignores_row_order_and_checks_columns() -> None:
    examples = _examples()
    shuffled = examples.sample(frac=1, random_state=5)
    pd.testing.assert_frame_equal(
        diversity_table(examples, homogenization_model=None), diversity_table(shuffled, homogenization_model=None)
    )
    with pytest.raises(ValueError, match="context"):
        diversity_table(examples.drop(columns="context"), homogenization_model=None)


def test_diversity_table_with_a_model_per_language(tiny_model: str) -> None:
    table = diversity_table(_examples(), homogenization_model={"fa": tiny_model}, homogenization_num_layers=2)
    fa = table[table["config"] == "fa"].set_index("category")
    assert fa["homogenization"].notna().all()
    assert fa.loc["Average", "homogenization"] == pytest.approx(fa.loc[["Age", "Gender"], "homogenization"].mean())
    assert fa.loc["Overall", "homogenization_note"] == f"BERTScore F1, {tiny_model} layer 2, all 10 pairs"
    en = table[table["config"] == "en"]
    assert en["homogenization"].isna().all()
    assert "no homogenization model" in en["homogenization_note"].iloc[0]


def test_table2_markdown_and_plots(tmp_path: Path) -> None:
    table = diversity_table(_examples(), homogenization_model=None)
    markdown = table2_markdown(table)
    assert "### fa\n" in markdown and "### fa-names\n" in markdown and "### en\n" in markdown
    assert "| Category | # units | NGD ↑ | TTR ↑ | Self-BLEU ↓ | BERTScore ↓ |" in markdown
    ngd = table.loc[(table["config"] == "fa") & (table["category"] == "Age"), "ngd"].item()
    assert f"| Age | 3 | {ngd:.4f} |" in markdown
    assert "| **Average** |" in markdown and "not computed" in markdown
    assert "- Age, Gender, Average, Overall: not computed: no homogenization model" in markdown

    paths = plot_metric_bars(table, tmp_path / "a")
    assert [path.name for path in paths] == [
        "diversity_ngd.png",
        "diversity_ttr.png",
        "diversity_self_bleu.png",
        "diversity_homogenization.png",
    ]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in paths)
    again = plot_metric_bars(table, tmp_path / "b")
    assert [path.read_bytes() for path in paths] == [path.read_bytes() for path in again]
