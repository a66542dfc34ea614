"""Writes the bundled PBBQ sample's stand-in review round (annotations/review/sample/): its items from a build of the
sample, each given to two reviewers, and their sheets answered as written below, then imported into
``decisions.csv`` (what ``configs/sample-reviewed.toml`` names).

**The reviewers are stand-ins.** The answers below were written for the sample by the builder's developers standing
in for reviewers (a reading of the sample's releases, issue 37), not by a review panel; the card says so.

Run: ``python annotations/review/make_sample_round.py RUN`` (RUN: a build of ``configs/sample.toml``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.names import load_name_table
from pbbq.tasks.review.items import context_items, name_items, translation_items
from pbbq.tasks.review.rounds import assign, stratified_sample
from pbbq.tasks.review.sheets import write_round

ROUND = REPO_ROOT / "annotations" / "review" / "sample"
REVIEWERS = ["stand-in-a", "stand-in-b"]
NATIONALITIES = {"افغانستانی", "هندی"}
AFGHAN_READ_AS_IRANIAN = {"حمیرا", "زکیه", "شکریه"}
"""Humaira, Zakia, Shukria: names an Iranian reader takes for Iranian (issue 37's reading of fa-names)."""
DISPUTED = "علی‌داد"
"""Alidad: Afghan (Hazara) to one stand-in, Iranian to the other; the stricter decision takes it out of the draw."""
CALQUE = "On a television cooking contest"
"""English wording a native reader would not write (issue 37): "In a television cooking contest"."""


def items_of(run: Path) -> pd.DataFrame:
    table = load_name_table(REPO_ROOT / "annotations" / "names" / "names_fa.csv")
    names = name_items(table, pd.read_parquet(run / "06_names" / "proxy_strength.parquet"))
    names = names[names["source"].str.split("|").str[0].isin(NATIONALITIES)]
    segments = pd.read_parquet(run / "07_translate" / "segments.parquet")
    translations = translation_items(segments, "en", "fa", pd.read_parquet(run / "05_instantiate" / "examples.parquet"))
    calques = translations[translations["machine_output"].str.startswith(CALQUE)]
    templates = pd.read_parquet(run / "04_disambiguate" / "templates.parquet")
    contexts = context_items(templates, pd.read_parquet(run / "02_survey" / "stereotypes.parquet"))
    return pd.concat([stratified_sample(contexts, 8, seed=7), calques, names], ignore_index=True)


def answer(row: pd.Series, reviewer: str) -> dict[str, str]:
    if row["kind"] == "names":
        group, gender = row["source"].split("|")
        name = row["machine_output"]
        if name in AFGHAN_READ_AS_IRANIAN or (name == DISPUTED and reviewer == REVIEWERS[1]):
            group = "ایرانی"
        return {"group": group, "gender": gender, "verdict": "accept"}
    if row["kind"] == "contexts":
        return {"disambiguates": "yes", "natural": "yes", "verdict": "accept"}
    fixed = row["machine_output"].replace(CALQUE, "In a television cooking contest", 1)
    return {"faithful": "yes", "natural": "no", "same_entities": "yes", "verdict": "fix", "fix_text": fixed}


def write(run: Path) -> None:
    items = items_of(run)
    assignment = assign(items, REVIEWERS, 2, seed=7)
    meta = {
        "round_id": str(assignment["round_id"].iloc[0]),
        "run": "a build of configs/sample.toml",
        "items": ["contexts", "translations:en", "names"],
        "reviewers": REVIEWERS,
        "overlap": 2,
        "n_items": len(items),
        "stand_in": "answers written for the sample by people standing in for reviewers, not a review panel",
    }
    write_round(ROUND, items, assignment, meta, meta["items"])
    for reviewer in REVIEWERS:
        path = ROUND / "sheets" / f"{reviewer}.csv"
        sheet = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        merged = sheet.merge(items[["item_id", "source"]], on="item_id", how="left")
        for index, row in merged.iterrows():
            for column, value in answer(row, reviewer).items():
                sheet.loc[index, column] = value
        sheet.to_csv(path, index=False, encoding="utf-8-sig")
    main(["review", "import", str(ROUND)])


if __name__ == "__main__":
    write(Path(sys.argv[1]))
