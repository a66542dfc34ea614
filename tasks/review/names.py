"""Names judged by people: which names leave their group's draw and how strongly each group's names signal it to
a reader (DESIGN §9; issue 37).

A name's reviewers each say which group it signals to them and which gender. A name leaves the draw of its group
when the reviewers who judged it (with the hash of that name, group and gender) did not in majority name its group,
or its gender (``either`` counts as its gender), or rejected it; with two reviewers who disagree, the stricter:
it leaves. The **human proxy strength** of a group is the share of its reviewers' answers, over its judged names,
that name the group; where a round judged a group's names it replaces the classifier's verdict
(:mod:`pbbq.tasks.names.strength`): the group is strong when its human strength reaches the same threshold.
"""

from __future__ import annotations

import pandas as pd

from .decisions import answers_of
from .items import content_hash

HUMAN_STRENGTH = "human_strength"
"""The name table's column of its group's human proxy strength (NaN where no round judged the group)."""


def name_judgments(name_table: pd.DataFrame, decisions: pd.DataFrame) -> pd.DataFrame:
    """Per name of the table that a round judged (its current hash): the share of its reviewers who named its
    group, who gave its gender, whether one rejected it, and whether it leaves the draw."""
    table = name_table.assign(
        hash=[
            content_hash(lang, group, name, gender)
            for lang, group, name, gender in zip(
                name_table["lang"], name_table["group"], name_table["name"], name_table["gender"], strict=True
            )
        ]
    )
    judged = answers_of(decisions[decisions["kind"] == "names"])
    for column in ("group", "gender"):
        if column not in judged:
            judged[column] = ""
    rows = judged.merge(table[["lang", "group", "name", "gender", "hash"]], on="hash", suffixes=("_said", ""))
    if rows.empty:
        return pd.DataFrame(columns=["lang", "group", "name", "n_reviewers", "group_share", "gender_share", "leaves"])
    rows["named_group"] = rows["group_said"] == rows["group"]
    rows["named_gender"] = rows["gender_said"].isin(["either"]) | (rows["gender_said"] == rows["gender"])
    rows["rejected"] = rows["verdict"] == "reject"
    per = rows.groupby(["lang", "group", "name"], sort=True).agg(
        n_reviewers=("reviewer", "size"),
        group_share=("named_group", "mean"),
        gender_share=("named_gender", "mean"),
        rejected=("rejected", "any"),
    )
    per["leaves"] = (per["group_share"] <= 0.5) | (per["gender_share"] <= 0.5) | per["rejected"]
    return per.reset_index()


def reviewed_name_table(name_table: pd.DataFrame, decisions: pd.DataFrame) -> pd.DataFrame:
    """The name table without the names that leave their group's draw, with each group's human proxy strength
    (:data:`HUMAN_STRENGTH`; NaN for a group no round judged)."""
    judged = name_judgments(name_table, decisions)
    strength = judged.groupby(["lang", "group"])["group_share"].mean().rename(HUMAN_STRENGTH)
    leaving = set(zip(*(judged.loc[judged["leaves"], c] for c in ("lang", "group", "name")), strict=True))
    keep = [
        (lang, group, name) not in leaving
        for lang, group, name in zip(name_table["lang"], name_table["group"], name_table["name"], strict=True)
    ]
    kept = name_table[keep].reset_index(drop=True)
    return kept.join(strength, on=["lang", "group"]) if len(strength) else kept.assign(**{HUMAN_STRENGTH: float("nan")})


def with_human_verdict(strength: pd.DataFrame, name_table: pd.DataFrame) -> pd.DataFrame:
    """The classifier's proxy strength table with ``strong`` decided by people where a round judged the group
    (``name_table``: :func:`reviewed_name_table`'s); unchanged without the column."""
    if HUMAN_STRENGTH not in name_table:
        return strength
    human = name_table.drop_duplicates(["lang", "group"]).set_index(["lang", "group"])[HUMAN_STRENGTH]
    values = [
        human.get((lang, group), float("nan")) for lang, group in zip(strength["lang"], strength["group"], strict=True)
    ]
    by_people = pd.Series(values, index=strength.index, dtype=float)
    decided = by_people.notna()
    return strength.assign(strong=strength["strong"].where(~decided, by_people >= strength["threshold"]))
