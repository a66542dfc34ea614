"""BERTScore homogenization (PBBQ Appendix C.4): equal to bert_score.score on the same pairs with a tiny BERT,
the seeded pair sample, and not computed (with the reason) without the model or the extra."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from pbbq.tasks.diversity.homogenization import (
    HomogenizationResult,
    _embed,
    _pair_f1,
    _pairs,
    homogenization_bertscore,
    load_scorer,
)
from tests.diversity_support import SENTENCES, tiny_bert

tiny_model = pytest.fixture(tiny_bert, scope="module", name="tiny_model")  # built once for this file


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
    scorer = load_scorer(tiny_model, 2, 4, "cpu")
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
