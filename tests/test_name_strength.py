"""How strongly a group's names stand for it (tasks/names/strength.py) and what the names stage does with a weak
group: examples naming it are left out of fa-names as ``weak_proxy`` rows, reported per group and counted in the
funnel."""

from __future__ import annotations

import pandas as pd

from pbbq.tasks.names import NamesParams, names
from pbbq.tasks.names.strength import PROXY_STRENGTH, proxy_strength
from pbbq.tasks.names.tables import ERAS, NAME_COLUMNS
from tests.helpers import stage_by_folder
from tests.names_support import example_frame, name_example, pin_table


def _table(groups: dict[str, str]) -> pd.DataFrame:
    """Per group, its 12 names written from a stem: two per gender and era, '<stem>-f-pre1970-0'."""
    rows = [
        ("fa", group, "", gender, era, f"{stem}-{gender[0]}-{era}-{k}", "x", "")
        for group, stem in groups.items()
        for gender in ("female", "male")
        for era in ERAS
        for k in range(2)
    ]
    return pd.DataFrame(rows, columns=NAME_COLUMNS)


def test_names_that_share_a_mark_within_their_group_identify_it_fully() -> None:
    """Every ترک name starts 'ت-', every فارس name 'ف-': each held-out name goes back to its group, strength 1;
    two groups: chance 1/2, threshold 1/2 + 0.10."""
    strength = proxy_strength(pin_table(), {("fa", "Ethnicity"): {"ترک", "فارس"}}, margin=0.10, seed=42)
    assert list(strength.columns) == PROXY_STRENGTH.names
    assert strength.drop(columns=["lang", "category"]).to_dict(orient="records") == [
        {"group": g, "n_groups": 2, "n_names": 12, "strength": 1.0, "chance": 0.5, "threshold": 0.6, "strong": True}
        for g in ("ترک", "فارس")
    ]


SAME_NAMES = {"ترک": "ت", "فارس": "ف", "کرد": "ف", "لر": "ل"}
"""کرد's names are فارس's: no classifier can tell those two groups apart by their names."""


def test_groups_with_the_same_names_are_weak() -> None:
    """A held-out فارس name is also a کرد name the classifier was trained on, and the other way round: neither
    group gets its names back even as often as chance (1/4), far under the threshold 1/4 + 0.10; ترک's and لر's
    names are their own (strength 1)."""
    strength = proxy_strength(_table(SAME_NAMES), {("fa", "Ethnicity"): set(SAME_NAMES)}, margin=0.10, seed=42)
    by_group = strength.set_index("group")
    assert by_group["threshold"].tolist() == [0.35] * 4
    assert by_group.loc[["ترک", "لر"], "strength"].tolist() == [1.0, 1.0]
    assert (by_group.loc[["فارس", "کرد"], "strength"] < 0.25).all()
    assert by_group["strong"].to_dict() == {"ترک": True, "فارس": False, "لر": True, "کرد": False}


def test_a_category_with_one_group_has_nothing_to_tell_it_from() -> None:
    strength = proxy_strength(pin_table(), {("fa", "Ethnicity"): {"ترک"}}, margin=0.10, seed=42)
    assert strength[["group", "strength", "chance", "strong"]].values.tolist() == [["ترک", 0.0, 1.0, False]]


def test_the_stage_leaves_out_examples_that_name_a_weak_group() -> None:
    examples = example_frame(
        name_example("ETH-01-T1-0a1b", "دانشجوی ترک", "دانشجوی فارس"),
        name_example("ETH-02-T1-0a1b", "دانشجوی ترک", "دانشجوی کرد"),
        name_example("ETH-03-T1-0a1b", "دانشجوی ترک", "دانشجوی لر"),
    )
    output = names(examples, _table(SAME_NAMES), NamesParams())
    weak = output["weak_proxy"]
    assert weak["example_id"].tolist() == ["ETH-01-T1-0a1b", "ETH-02-T1-0a1b"]
    assert set(weak["reason"]) == {"weak_proxy"}
    assert set(output["examples"]["source_example_id"]) == {"ETH-03-T1-0a1b"} and len(output["examples"]) == 3
    report = output.report
    assert report["proxy_strength"]["weak_proxy_examples"] == 2
    assert report["proxy_strength"]["threshold"] == "chance (1 / groups of the category) + 0.1"
    assert [row["group"] for row in report["proxy_strength"]["per_group"]] == ["ترک", "فارس", "لر", "کرد"]
    assert report["counts"] == {"in": 3, "out": 3, "mapped": 1}
    assert stage_by_folder()["06_names"].funnel_counts(output) == {"names_weak_proxy": 2}
    kept_all = names(examples, _table(SAME_NAMES), NamesParams(drop_weak_proxies=False))
    assert kept_all["weak_proxy"].empty and kept_all["proxy_strength"].empty
    assert len(kept_all["examples"]) == 9
