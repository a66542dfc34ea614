"""``pbbq evaluate --limit N``'s examples (tasks/evaluation/sample.py): stratified by category × context condition ×
question polarity, seeded, and the ``fa-names`` rows paired with the ``fa`` rows drawn (ε_c's pairs)."""

from __future__ import annotations

import pandas as pd
import pytest

from pbbq.tasks.evaluation.sample import STRATUM, select_examples
from tests.bbq_records import NAME_SEEDS, make_records

NAMED = ("Ethnicity", "Socio-economic Status")
"""The categories whose examples have name variants here: as in the sample's release, the first rows of ``fa``
(Age) have none, so its first N rows and ``fa-names``' first N share no example."""


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    records = make_records()
    records["fa-names"] = records["fa-names"][records["fa-names"]["category"].isin(NAMED)].reset_index(drop=True)
    return records


def drawn(frames: dict[str, pd.DataFrame], config: str, docs: dict[str, list[int]]) -> pd.DataFrame:
    return frames[config].iloc[docs[config]]


def test_every_stratum_of_every_config_is_drawn(frames: dict[str, pd.DataFrame]) -> None:
    strata = {config: frame.groupby(list(STRATUM)).ngroups for config, frame in frames.items()}
    assert strata == {"fa": 12, "fa-names": 8, "en": 12}  # 3 categories (2 named) × 2 conditions × 2 polarities
    selection = select_examples(frames, 24, seed=0)
    for config in frames:
        rows = drawn(frames, config, selection.docs)
        assert len(rows) == 24 and rows["example_id"].is_unique
        assert rows.groupby(list(STRATUM)).ngroups == strata[config], config
        assert selection.report[config]["strata_covered"] == strata[config]
    # each stratum about as often: 24 rows over 12 strata, two each
    assert drawn(frames, "en", selection.docs).groupby(list(STRATUM)).size().tolist() == [2] * 12


def test_name_variants_are_variants_of_the_fa_rows_drawn(frames: dict[str, pd.DataFrame]) -> None:
    for limit in (4, 24, 40):
        selection = select_examples(frames, limit, seed=3)
        names, explicit = drawn(frames, "fa-names", selection.docs), drawn(frames, "fa", selection.docs)
        assert names["source_example_id"].isin(explicit["example_id"]).all(), limit
        assert selection.report["fa-names"]["paired"] == limit
    # every sub-seed in both context conditions, so that ε_c has a value per sub-seed and condition
    names = drawn(frames, "fa-names", select_examples(frames, 24, seed=3).docs)
    assert names.groupby(["variant", "context_condition"]).size().to_dict() == {
        (seed, condition): 4 for seed in NAME_SEEDS for condition in ("ambig", "disambig")
    }
    # en prefers the translations of the fa rows drawn
    selection = select_examples(frames, 24, seed=3)
    assert drawn(frames, "en", selection.docs)["source_example_id"].isin(selection.ids("fa", frames["fa"])).all()


def test_the_seed_decides_the_draw(frames: dict[str, pd.DataFrame]) -> None:
    first, again, other = (select_examples(frames, 24, seed=seed).docs for seed in (7, 7, 8))
    assert first == again and first != other
    assert all(docs == sorted(docs) for docs in first.values())  # lm-eval maps positions in this order


def test_a_limit_over_a_config_takes_it_whole(frames: dict[str, pd.DataFrame]) -> None:
    selection = select_examples(frames, 100, seed=0)
    assert selection.docs["fa"] == list(range(48)) and selection.docs["en"] == list(range(48))
    names = drawn(frames, "fa-names", selection.docs)
    assert len(names) == 72 and names["source_example_id"].isin(frames["fa"]["example_id"]).all()
