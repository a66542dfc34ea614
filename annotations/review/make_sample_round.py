"""Writes the bundled samples' stand-in review rounds: PBBQ's (``annotations/review/sample/``, from a build of
``configs/sample.toml`` without its ``[review]`` section) and the adaptation's (``annotations/review/adapt-sample/``,
likewise from ``configs/adapt-sample.toml``): their items, each given to two reviewers, the sheets answered as
written below, then imported into ``decisions.csv`` (what the two configurations' ``[review] decisions`` name). The
round is judged on what the machine wrote, so the build it is made from must not have applied it already.

**The reviewers are stand-ins.** The answers below were written for the sample by the builder's developers standing
in for reviewers (a reading of the sample's releases, issue 37), not by a review panel; the card says so.

Run: ``python annotations/review/make_sample_round.py RUN [ADAPT_RUN]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.names import load_name_table
from pbbq.tasks.review.items import adapt_items, context_items, name_items, translation_items
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
    examples = pd.read_parquet(run / "05_instantiate" / "examples.parquet")
    stereotypes = pd.read_parquet(run / "02_survey" / "stereotypes.parquet")
    translations = translation_items(segments, "en", "fa", examples, stereotypes)
    calques = translations[translations["machine_output"].str.startswith(CALQUE)]
    templates = pd.read_parquet(run / "04_disambiguate" / "templates.parquet")
    contexts = context_items(templates, stereotypes)
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


ADAPT_ROUND = REPO_ROOT / "annotations" / "review" / "adapt-sample"
ADAPT_GROUPS = {"Afghan", "Bangladeshi", "Pashtun", "Sindhi"}
NOT_SIGNALLING = {"Gulalai", "Wahidullah", "Tanvir", "Sakib"}
"""Read by a Pakistani reader as Pakistani Pashtun (Gulalai, Wahidullah) or Pakistani (Tanvir, Sakib), not as
Afghan or Bangladeshi (issue 37's reading of the adaptation sample's en-names); Pashtun and Sindhi names (Zarak,
Palwasha; Allah Dino, Marvi) read plainly as theirs, which the classifier had judged weak."""


def adapt_items_of(run: Path) -> pd.DataFrame:
    table = load_name_table(REPO_ROOT / "annotations" / "bbq" / "names-pakistan-sample.csv")
    names = name_items(table, pd.read_parquet(run / "06_names" / "proxy_strength.parquet"))
    names = names[names["source"].str.split("|").str[0].isin(ADAPT_GROUPS)]
    adapted = adapt_items(pd.read_parquet(run / "03_adapt" / "templates.parquet"))
    return pd.concat([adapted, names], ignore_index=True)


def adapt_answer(row: pd.Series, reviewer: str) -> dict[str, str]:
    if row["kind"] == "adapt":
        return {"stereotype_holds": "yes", "verdict": "accept"}
    group, gender = row["source"].split("|")
    return {
        "group": "none" if row["machine_output"] in NOT_SIGNALLING else group,
        "gender": gender,
        "verdict": "accept",
    }


def write(run: Path, folder: Path = ROUND, adapt: bool = False) -> None:
    items = adapt_items_of(run) if adapt else items_of(run)
    assignment = assign(items, REVIEWERS, 2, seed=7)
    meta = {
        "round_id": str(assignment["round_id"].iloc[0]),
        "run": f"a build of configs/{'adapt-sample' if adapt else 'sample'}.toml",
        "items": ["adapt", "names"] if adapt else ["contexts", "translations:en", "names"],
        "reviewers": REVIEWERS,
        "overlap": 2,
        "n_items": len(items),
        "stand_in": "answers written for the sample by people standing in for reviewers, not a review panel",
    }
    write_round(folder, items, assignment, meta, meta["items"])
    for reviewer in REVIEWERS:
        path = folder / "sheets" / f"{reviewer}.csv"
        sheet = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        # the item's own text: a sheet's right-to-left cells start with a direction mark
        merged = sheet.drop(columns="machine_output").merge(
            items[["item_id", "source", "machine_output"]], on="item_id", how="left"
        )
        for index, row in merged.iterrows():
            for column, value in (adapt_answer if adapt else answer)(row, reviewer).items():
                sheet.loc[index, column] = value
        sheet.to_csv(path, index=False, encoding="utf-8-sig")
    main(["review", "import", str(folder)])


if __name__ == "__main__":
    write(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        write(Path(sys.argv[2]), ADAPT_ROUND, adapt=True)
