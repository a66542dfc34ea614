"""Make survey/responses.csv: 250 SYNTHETIC survey respondents for the bundled PBBQ sample.

These responses are synthetic. They were made by this script, with a fixed seed, to exercise the survey
filter (keep a stereotype when more than 60 % of those who answered say 'yes'); they were not collected from
people and say nothing about what anybody in Iran believes.

What is real is the shape of the PBBQ paper's survey (§3.2, Appendix E): 250 respondents, each answering, for
every stereotype of survey/questionnaire.csv, whether they have heard of or believe it; and the respondents'
demographics, whose counts per level are the paper's Appendix E counts exactly (each column shuffled with the
seed, independently of the others).

Answers. Every stereotype has a designed acceptance share (``DESIGN`` below). Among the respondents who answer
an item, exactly round(share x answering) say 'yes', and who they are is drawn with weights that depend on the
respondent's demographics (mostly the age band; gender, religion or political orientation for a few items),
so a breakdown of acceptance by demographic shows differences. About 1 % of the cells are left empty (the
respondent skipped the item); the items designed to sit at the 60 % threshold are never skipped, so their
share is the same whether a skipped cell counts in the denominator or not.

Columns of responses.csv (UTF-8, comma-separated, one header row):
    respondent_id            R001..R250, unique
    gender                   male | female
    age_band                 18-24 | 25-34 | 35-44 | 45-54 | 55+
    income_band              monthly income, million IRR: <100 | 100-200 | 200-310 | 310-510 | 510-750 | 750+
                             | prefer_not_to_say
    education                less_than_high_school | diploma | bachelor | master | phd | post_phd
    sexual_orientation       homosexual | heterosexual | prefer_not_to_say
    religion                 islam | christianity | zoroastrianism | judaism | other | none | prefer_not_to_say
    political_orientation    reformist | conservative | monarchist | communist | liberal | republican | other
    <stereotype_id> ...      one column per stereotype, in questionnaire order: 'yes' (has heard of or believes
                             it), 'no', or empty (skipped)

Run from anywhere:  python survey/make_responses.py   (writes responses.csv next to this file, prints the
realised share of every stereotype and checks the design with assertions).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20250611
N_RESPONDENTS = 250
SKIP_RATE = 0.01
THRESHOLD = 0.60

HERE = Path(__file__).resolve().parent
QUESTIONNAIRE = HERE / "questionnaire.csv"
OUTPUT = HERE / "responses.csv"

# PBBQ paper, Appendix E (Figures 6-12): counts per level, in the order the paper lists them.
DEMOGRAPHICS: dict[str, dict[str, int]] = {
    "gender": {"male": 140, "female": 110},
    "age_band": {"18-24": 85, "25-34": 68, "35-44": 52, "45-54": 27, "55+": 18},
    "income_band": {
        "<100": 47,
        "100-200": 88,
        "200-310": 42,
        "310-510": 32,
        "510-750": 20,
        "750+": 8,
        "prefer_not_to_say": 13,
    },
    "education": {"less_than_high_school": 15, "diploma": 60, "bachelor": 102, "master": 55, "phd": 13, "post_phd": 5},
    "sexual_orientation": {"homosexual": 19, "heterosexual": 198, "prefer_not_to_say": 33},
    "religion": {
        "islam": 203,
        "christianity": 5,
        "zoroastrianism": 7,
        "judaism": 2,
        "other": 6,
        "none": 19,
        "prefer_not_to_say": 8,
    },
    "political_orientation": {
        "reformist": 30,
        "conservative": 23,
        "monarchist": 65,
        "communist": 8,
        "liberal": 53,
        "republican": 46,
        "other": 25,
    },
}

AGE_SCORE = {"18-24": -1.0, "25-34": -0.5, "35-44": 0.0, "45-54": 0.5, "55+": 1.0}

# Per stereotype: the designed share of 'yes' among those who answer, the slope of the log-weight on the age
# score (-1 for 18-24 .. +1 for 55+; positive = older respondents accept it more), optional extra log-weight
# effects {column: {level: effect}}, and 'complete' for items nobody skips.
# Groups: most items 0.65-0.90 (kept); six clearly below (0.33-0.46, dropped); five near the threshold
# (0.580, 0.588 dropped; 0.612, 0.620, 0.628 kept) and GEN-03 exactly at 0.600 (dropped: keep is > 0.60).
DESIGN: dict[str, dict] = {
    "AGE-01": {"share": 0.82, "age": -0.35},
    "AGE-02": {"share": 0.72, "age": 0.45},
    "AGE-03": {"share": 0.620, "age": -0.30, "complete": True},
    "PRO-01": {"share": 0.84, "age": 0.10},
    "PRO-02": {"share": 0.78, "age": 0.20},
    "PRO-03": {"share": 0.42, "age": 0.30},
    "SES-01": {"share": 0.86, "age": 0.20, "extra": {"political_orientation": {"conservative": -0.8}}},
    "SES-02": {"share": 0.70, "age": 0.30},
    "SES-03": {"share": 0.76, "age": -0.25},
    "EDU-01": {"share": 0.79, "age": 0.10},
    "EDU-02": {"share": 0.68, "age": 0.35},
    "EDU-03": {"share": 0.38, "age": 0.25},
    "DIS-01": {"share": 0.74, "age": 0.35},
    "DIS-02": {"share": 0.81, "age": 0.20},
    "DIS-03": {"share": 0.66, "age": 0.45},
    "DSE-01": {"share": 0.77, "age": 0.30},
    "DSE-02": {"share": 0.69, "age": 0.40},
    "DSE-03": {"share": 0.46, "age": 0.35},
    "DOM-01": {"share": 0.88, "age": 0.10},
    "DOM-02": {"share": 0.75, "age": 0.15},
    "DOM-03": {"share": 0.612, "age": -0.20, "complete": True},
    "ETH-01": {"share": 0.80, "age": 0.20},
    "ETH-02": {"share": 0.73, "age": 0.25},
    "ETH-03": {"share": 0.628, "age": 0.20, "complete": True},
    "FAM-01": {"share": 0.89, "age": 0.10, "extra": {"gender": {"female": 0.6}}},
    "FAM-02": {"share": 0.71, "age": 0.45},
    "FAM-03": {"share": 0.580, "age": 0.30, "complete": True},
    "GEN-01": {"share": 0.84, "age": 0.25, "extra": {"gender": {"male": 0.7}}},
    "GEN-02": {"share": 0.74, "age": 0.20, "extra": {"gender": {"female": 0.5}}},
    "GEN-03": {"share": 0.600, "age": 0.35, "extra": {"gender": {"male": 0.6}}, "complete": True},
    "PRP-01": {"share": 0.72, "age": 0.30},
    "PRP-02": {"share": 0.83, "age": -0.20},
    "PRP-03": {"share": 0.67, "age": -0.25},
    "NAT-01": {"share": 0.75, "age": 0.35},
    "NAT-02": {"share": 0.70, "age": 0.15},
    "NAT-03": {"share": 0.36, "age": -0.20},
    "APP-01": {"share": 0.73, "age": 0.30},
    "APP-02": {"share": 0.67, "age": 0.50},
    "APP-03": {"share": 0.33, "age": 0.10},
    "POL-01": {"share": 0.72, "age": -0.15, "extra": {"political_orientation": {"conservative": -1.0}}},
    "POL-02": {"share": 0.66, "age": -0.30, "extra": {"political_orientation": {"monarchist": -1.0}}},
    "POL-03": {"share": 0.588, "age": 0.10, "extra": {"political_orientation": {"reformist": -1.0}}, "complete": True},
    "REL-01": {"share": 0.76, "age": -0.30, "extra": {"religion": {"none": 0.8}}},
    "REL-02": {"share": 0.68, "age": 0.45, "extra": {"religion": {"islam": 0.5, "none": -1.0}}},
    "REL-03": {"share": 0.44, "age": 0.30, "extra": {"religion": {"christianity": -1.5}}},
    "SEX-01": {"share": 0.70, "age": 0.50, "extra": {"sexual_orientation": {"homosexual": -1.2}}},
    "SEX-02": {"share": 0.80, "age": 0.30},
    "SEX-03": {"share": 0.67, "age": 0.40, "extra": {"sexual_orientation": {"homosexual": -1.0}}},
}


def read_questionnaire(path: Path) -> list[tuple[str, str]]:
    """(stereotype_id, category) in questionnaire order."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [(row["stereotype_id"], row["category"]) for row in csv.DictReader(handle)]


def make_demographics(rng: np.random.Generator) -> pd.DataFrame:
    columns = {}
    for column, counts in DEMOGRAPHICS.items():
        levels = np.repeat(list(counts), list(counts.values()))
        assert len(levels) == N_RESPONDENTS, column
        columns[column] = rng.permutation(levels)
    frame = pd.DataFrame(columns)
    frame.insert(0, "respondent_id", [f"R{i:03d}" for i in range(1, N_RESPONDENTS + 1)])
    return frame


def log_weights(people: pd.DataFrame, design: dict) -> np.ndarray:
    weight = design["age"] * people["age_band"].map(AGE_SCORE).to_numpy()
    for column, effects in design.get("extra", {}).items():
        weight = weight + people[column].map(effects).fillna(0.0).to_numpy()
    return weight


def make_answers(people: pd.DataFrame, ids: list[str], rng: np.random.Generator) -> pd.DataFrame:
    skipped = rng.random((len(people), len(ids))) < SKIP_RATE
    answers = {}
    for j, stereotype_id in enumerate(ids):
        design = DESIGN[stereotype_id]
        if design.get("complete"):
            skipped[:, j] = False
        answering = np.flatnonzero(~skipped[:, j])
        n_yes = round(design["share"] * len(answering))
        # Weighted draw of exactly n_yes respondents without replacement (Gumbel top-k).
        keys = log_weights(people.iloc[answering], design) + rng.gumbel(size=len(answering))
        yes = answering[np.argsort(-keys, kind="stable")[:n_yes]]
        column = np.full(len(people), "no", dtype=object)
        column[yes] = "yes"
        column[skipped[:, j]] = ""
        answers[stereotype_id] = column
    return pd.DataFrame(answers, index=people.index)


def main() -> None:
    rng = np.random.default_rng(SEED)
    questionnaire = read_questionnaire(QUESTIONNAIRE)
    ids = [stereotype_id for stereotype_id, _ in questionnaire]
    category = dict(questionnaire)
    assert set(ids) == set(DESIGN), sorted(set(ids) ^ set(DESIGN))

    people = make_demographics(rng)
    responses = pd.concat([people, make_answers(people, ids, rng)], axis=1)
    responses.to_csv(OUTPUT, index=False, encoding="utf-8", lineterminator="\n")

    # ---- report and check what was written, read back as the builder reads it
    written = pd.read_csv(OUTPUT, dtype=str, keep_default_na=False, encoding="utf-8")
    answers = written[ids]
    n_yes = (answers == "yes").sum()
    n_answered = answers.isin(["yes", "no"]).sum()
    share = n_yes / n_answered  # skipped cells count in no denominator
    share_all = n_yes / len(written)  # skipped cells counted as 'no'
    kept = share > THRESHOLD

    print(f"{len(written)} synthetic respondents, {len(ids)} stereotypes, seed {SEED}")
    print(f"skipped cells: {int((answers == '').to_numpy().sum())} of {answers.size}")
    print(f"{'stereotype':<10} {'category':<24} {'yes':>4} {'n':>4} {'share':>6}  kept  youngest(18-24) oldest(45+)")
    young = written["age_band"] == "18-24"
    old = written["age_band"].isin(["45-54", "55+"])
    spread = {}
    for stereotype_id in ids:
        column = answers[stereotype_id]
        y = (column[young] == "yes").sum() / column[young].isin(["yes", "no"]).sum()
        o = (column[old] == "yes").sum() / column[old].isin(["yes", "no"]).sum()
        spread[stereotype_id] = o - y
        print(
            f"{stereotype_id:<10} {category[stereotype_id]:<24} {n_yes[stereotype_id]:>4} "
            f"{n_answered[stereotype_id]:>4} {share[stereotype_id]:>6.3f}  "
            f"{'yes ' if kept[stereotype_id] else 'no  '}  {y:>6.3f}          {o:>6.3f}"
        )
    by_gender = {
        level: (answers[written["gender"] == level] == "yes").sum().sum()
        / answers[written["gender"] == level].isin(["yes", "no"]).sum().sum()
        for level in ("male", "female")
    }
    print("overall acceptance by gender:", {k: round(float(v), 3) for k, v in by_gender.items()})

    # Demographics: exactly the paper's Appendix E counts.
    assert written["respondent_id"].is_unique and len(written) == N_RESPONDENTS
    assert list(written.columns) == ["respondent_id", *DEMOGRAPHICS, *ids]
    for column, counts in DEMOGRAPHICS.items():
        assert written[column].value_counts().to_dict() == counts, column
    # Answers are yes / no / empty only, about 1 % skipped.
    assert answers.isin(["yes", "no", ""]).to_numpy().all()
    assert 0.005 <= (answers == "").to_numpy().mean() <= 0.02
    # The share is on the same side of the threshold whichever way skipped cells are counted.
    assert ((share > THRESHOLD) == (share_all > THRESHOLD)).all()
    # Most stereotypes clearly above 60 %.
    clearly_above = share[(share >= 0.65) & (share <= 0.90)]
    assert len(clearly_above) >= 0.7 * len(ids), len(clearly_above)
    # At least 5 clearly below, in different categories.
    clearly_below = share[(share >= 0.30) & (share <= 0.50)]
    assert len(clearly_below) >= 5 and len({category[s] for s in clearly_below.index}) >= 5, clearly_below
    # At least 4 near the threshold, some on each side.
    near = share[(share >= 0.57) & (share <= 0.63)]
    assert len(near) >= 4 and (near > THRESHOLD).sum() >= 2 and (near < THRESHOLD).sum() >= 2, near
    # The boundary item sits exactly at the threshold and is dropped (keep is strictly > 0.60).
    assert n_yes["GEN-03"] == 150 and n_answered["GEN-03"] == 250 and not kept["GEN-03"]
    # Every category keeps at least one stereotype; at least two keep two or more.
    kept_per_category = pd.Series({c: 0 for c in set(category.values())})
    for stereotype_id in ids:
        kept_per_category[category[stereotype_id]] += int(kept[stereotype_id])
    assert (kept_per_category >= 1).all(), kept_per_category
    assert (kept_per_category >= 2).sum() >= 2, kept_per_category
    # Acceptance varies with age: several stereotypes differ by 10 points or more between the youngest and
    # the oldest respondents, in both directions.
    spread = pd.Series(spread)
    assert (spread >= 0.10).sum() >= 5 and (spread <= -0.10).sum() >= 2, spread.sort_values()
    print(
        f"kept {int(kept.sum())} of {len(ids)}; clearly below: {sorted(clearly_below.index)}; "
        f"near 60 %: {sorted(near.index)}; all checks passed"
    )


if __name__ == "__main__":
    main()
