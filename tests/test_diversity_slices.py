"""The metrics taken a slice of units at a time (``tokens_at_once``) give exactly what they give on the whole group:
n-gram keys packed the same in every slice, distinct n-grams and Self-BLEU's two largest counts reduced across
slices, NGD's n-grams across a cut counted once. And a vocabulary too large for packed keys takes a group whole."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbbq.tasks.diversity import ngrams
from pbbq.tasks.diversity.ngrams import (
    CodedTexts,
    code_token_lists,
    ngram_diversity_of_units,
    type_token_ratio_of_units,
    unit_slices,
)
from pbbq.tasks.diversity.self_bleu import _bleu_scores, self_bleu_of_units
from tests.diversity_support import reference_bleu_scores

WHOLE = 1 << 40
units_strategy = st.lists(st.lists(st.sampled_from("abcdefg"), max_size=9), min_size=2, max_size=25)


def _metrics(coded: CodedTexts, ids: np.ndarray, tokens_at_once: int) -> tuple[float, float, float, list[float]]:
    return (
        ngram_diversity_of_units(coded, ids, tokens_at_once),
        type_token_ratio_of_units(coded, ids, tokens_at_once),
        self_bleu_of_units(coded, ids, tokens_at_once),
        _bleu_scores(coded, ids, tokens_at_once).tolist(),
    )


def _same(sliced: tuple, whole: tuple) -> bool:
    """Equal bit for bit (NaN equal to NaN)."""
    return all(
        (a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
        for a, b in zip([*sliced[:3], *sliced[3]], [*whole[:3], *whole[3]], strict=True)
    )


@settings(max_examples=150, deadline=None)
@given(units_strategy, st.integers(1, 20), st.data())
def test_sliced_metrics_equal_the_whole_group(units: list[list[str]], tokens_at_once: int, data: st.DataObject) -> None:
    coded = code_token_lists(units)
    stop = np.array(data.draw(st.lists(st.booleans(), min_size=len(coded.stop), max_size=len(coded.stop))), dtype=bool)
    coded = dataclasses.replace(coded, stop=stop)
    everything = np.arange(len(coded))
    picked = np.array(sorted(data.draw(st.sets(st.sampled_from(everything.tolist()), min_size=2))))  # a category
    for ids in (everything, picked):
        assert len(unit_slices(coded, ids, tokens_at_once)) >= min(len(ids), 1)
        assert _same(_metrics(coded, ids, tokens_at_once), _metrics(coded, ids, WHOLE))


def _ngd_by_definition(units: list[list[str]]) -> float:
    """C.3's sum over the joined words, the four ratios (numpy's, as the stage has always published them) added in
    turn."""
    joined = [word for unit in units for word in unit]
    ngd = np.float64(0.0)
    for n in range(1, 5):
        grams = [tuple(joined[p : p + n]) for p in range(len(joined) - n + 1)]
        ngd += np.int64(len(set(grams))) / len(grams)
    return float(ngd)


@settings(max_examples=100, deadline=None)
@given(units_strategy, st.integers(1, 20))
def test_sliced_ngd_is_the_definition_to_the_last_bit(units: list[list[str]], tokens_at_once: int) -> None:
    coded = code_token_lists(units)
    value = ngram_diversity_of_units(coded, np.arange(len(coded)), tokens_at_once)
    if sum(map(len, units)) < 4:
        assert math.isnan(value)
    else:
        assert value == _ngd_by_definition(units)


def test_slices_are_whole_units_of_about_the_size() -> None:
    coded = code_token_lists([["a"] * 3, [], ["b"] * 5, ["c"], ["d"] * 2])
    runs = unit_slices(coded, np.arange(5), 4)
    assert [run.tolist() for run in runs] == [[0, 1, 2], [3, 4]]
    assert [run.tolist() for run in unit_slices(coded, np.arange(5), 1)] == [[0], [1, 2], [3], [4]]


def test_sliced_self_bleu_is_sacrebleus() -> None:
    rng = np.random.default_rng(5)
    sentences = [" ".join(rng.choice(list("abcdef"), size=rng.integers(0, 12))) for _ in range(40)]
    coded = code_token_lists([sentence.split() for sentence in sentences])
    scores = _bleu_scores(coded, np.arange(len(coded)), tokens_at_once=7)
    assert np.abs(scores - reference_bleu_scores(sentences, "none")).max() < 1e-9


def test_a_vocabulary_too_large_to_pack_takes_the_group_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    units = [list(rng.choice(list("abcdefgh"), size=rng.integers(0, 10))) for _ in range(30)]
    coded = code_token_lists(units)
    ids = np.arange(len(coded))
    packed = _metrics(coded, ids, 5)
    monkeypatch.setattr(ngrams, "PACKED_KEYS_BELOW", 2**11)  # 8 ** 4 = 2**12: too many for packed keys
    assert len(unit_slices(coded, ids, 5)) == 1
    assert _same(_metrics(coded, ids, 5), packed)


@pytest.mark.parametrize("arrow", [True, False])
def test_unit_texts_are_read_from_their_rows_in_every_chunk(arrow: bool) -> None:
    import pandas as pd
    import pyarrow as pa

    from pbbq.tasks.diversity import UnitTexts

    values = [["c", "a"], ["b"], ["d", "e", "f"]]
    chunked = pa.chunked_array(values, type=pa.large_string())
    column = (
        pd.arrays.ArrowStringArray(chunked)
        if arrow
        else pd.array([text for chunk in values for text in chunk], dtype=object)
    )
    texts = UnitTexts(column, np.array([5, 0, 2, 1, 3]))
    assert texts[0:5] == ["f", "c", "b", "a", "d"] and texts[1:3] == ["c", "b"]
    assert texts[3] == "a" and len(texts) == 5
    assert list(texts.of(np.array([1, 4]))) == ["c", "d"]
