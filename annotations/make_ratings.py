"""Make annotations/ratings.csv: SYNTHETIC ratings standing in for three human annotators.

These ratings are synthetic. They were made by this script, with a fixed seed, to exercise the annotation
gate (PakBBQ §3.2: drop a template whose Fleiss' kappa is below 0.2 or whose mean cultural relevance is
below 1.5); no person rated anything.

Every template of annotations/templates.csv gets 6 items (<template_id>-I1 .. -I6), and each item is labelled
by the same three annotators A1, A2, A3: one row per (template_id, item_id, annotator_id). Each row has

    target_label   stereo | nonstereo | neither   which group the annotator judges the item to target
    relevance      1 | 2 | 3                       cultural relevance of the template (1 low, 3 high)

Which template gets which kind of ratings is designed (the sets below):

- most templates: good agreement (labels mostly 'stereo', some items 'neither' or 'nonstereo', so kappa is
  defined and >= 0.4) and mean relevance >= 2;
- LOW_KAPPA: annotators disagree (kappa < 0.2), relevance good; all of accepted stereotypes, so the gate,
  not the survey, drops them;
- LOW_RELEVANCE: good agreement but mean relevance < 1.5;
- UNANIMOUS_STEREO: every annotator gives every item 'stereo'; Fleiss' kappa is 0/0 there (statsmodels
  returns NaN) and the builder defines it;
- RELEVANCE_AT_THRESHOLD: good agreement and mean relevance exactly 1.5 (kept: the gate drops < 1.5).

Run from anywhere:  python annotations/make_ratings.py   (writes ratings.csv next to this file, prints kappa and
mean relevance per template and checks the design with assertions, reading survey/questionnaire.csv and
survey/responses.csv to know which stereotypes the survey accepts).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

SEED = 1403
ITEMS_PER_TEMPLATE = 6
ANNOTATORS = ("A1", "A2", "A3")
MIN_KAPPA = 0.2
MIN_RELEVANCE = 1.5
SURVEY_THRESHOLD = 0.60

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates.csv"
QUESTIONNAIRE = HERE.parent / "survey" / "questionnaire.csv"
RESPONSES = HERE.parent / "survey" / "responses.csv"
OUTPUT = HERE / "ratings.csv"

LOW_KAPPA = {"AGE-01-T2", "SES-02-T2", "ETH-01-T2", "REL-01-T2"}
LOW_RELEVANCE = {"DIS-01-T2", "PRP-02-T2", "NAT-01-T2"}
UNANIMOUS_STEREO = {"GEN-01-T2"}
RELEVANCE_AT_THRESHOLD = {"SEX-02-T2"}

# Label patterns: 6 items x 3 annotators; S = stereo, O = nonstereo, N = neither.
GOOD_PATTERNS = [
    ["SSS", "SSS", "SSS", "SSS", "NNN", "SSN"],  # kappa 0.679
    ["SSS", "SSS", "SSS", "NNN", "OOO", "SSS"],  # kappa 1.000
    ["SSS", "SSS", "SSS", "SSS", "NNN", "SSO"],  # kappa 0.695
    ["SSS", "SSS", "SSS", "NNN", "NNN", "SSN"],  # kappa 0.766
    ["SSS", "SSS", "SSS", "NNN", "SSN", "SNN"],  # kappa 0.500
    ["SSS", "SSS", "SSS", "SSS", "NNN", "NNN"],  # kappa 1.000
]
DISAGREEING_PATTERNS = [
    ["SSS", "NNN", "SSN", "SNO", "NSO", "SON"],  # kappa 0.020
    ["SSS", "NNN", "SSN", "SNN", "SON", "OSN"],  # kappa 0.063
    ["SSS", "SSS", "SNN", "NSN", "ONS", "SSO"],  # kappa 0.069
]
UNANIMOUS_PATTERN = ["SSS"] * ITEMS_PER_TEMPLATE
LABEL = {"S": "stereo", "O": "nonstereo", "N": "neither"}

# Relevance multisets over the 18 rows of a template (shuffled over the rows).
GOOD_RELEVANCE = [
    [3] * 10 + [2] * 7 + [1] * 1,  # 2.50
    [3] * 8 + [2] * 9 + [1] * 1,  # 2.39
    [3] * 12 + [2] * 6,  # 2.67
    [3] * 6 + [2] * 10 + [1] * 2,  # 2.22
    [3] * 14 + [2] * 4,  # 2.78
]
LOW_RELEVANCE_SETS = [
    [1] * 13 + [2] * 5,  # 1.28
    [1] * 12 + [2] * 5 + [3] * 1,  # 1.39
    [1] * 14 + [2] * 4,  # 1.22
]
THRESHOLD_RELEVANCE = [1] * 10 + [2] * 7 + [3] * 1  # 27 / 18 = 1.5 exactly


def template_rows(template_id: str, rng: np.random.Generator) -> list[dict]:
    if template_id in UNANIMOUS_STEREO:
        pattern = UNANIMOUS_PATTERN
    elif template_id in LOW_KAPPA:
        pattern = DISAGREEING_PATTERNS[rng.integers(len(DISAGREEING_PATTERNS))]
    else:
        pattern = GOOD_PATTERNS[rng.integers(len(GOOD_PATTERNS))]
    if template_id in LOW_RELEVANCE:
        relevance = LOW_RELEVANCE_SETS[rng.integers(len(LOW_RELEVANCE_SETS))]
    elif template_id in RELEVANCE_AT_THRESHOLD:
        relevance = THRESHOLD_RELEVANCE
    else:
        relevance = GOOD_RELEVANCE[rng.integers(len(GOOD_RELEVANCE))]
    items = rng.permutation(len(pattern))  # which item gets which label triple
    relevance = rng.permutation(relevance)
    rows = []
    for position, item in enumerate(items):
        labels = rng.permutation(list(pattern[item]))  # which annotator gives which label
        for k, annotator in enumerate(ANNOTATORS):
            rows.append(
                {
                    "template_id": template_id,
                    "item_id": f"{template_id}-I{position + 1}",
                    "annotator_id": annotator,
                    "target_label": LABEL[labels[k]],
                    "relevance": int(relevance[position * len(ANNOTATORS) + k]),
                }
            )
    return rows


def kappa_of(group: pd.DataFrame) -> float:
    """Fleiss' kappa over a template's items (NaN when every rating is the same label)."""
    matrix = group.pivot(index="item_id", columns="annotator_id", values="target_label").to_numpy()
    counts, _ = aggregate_raters(matrix)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(fleiss_kappa(counts, method="fleiss"))


def accepted_stereotypes() -> set[str]:
    responses = pd.read_csv(RESPONSES, dtype=str, keep_default_na=False, encoding="utf-8")
    questionnaire = pd.read_csv(QUESTIONNAIRE, dtype=str, keep_default_na=False, encoding="utf-8")
    answers = responses[questionnaire["stereotype_id"].tolist()]
    share = (answers == "yes").sum() / answers.isin(["yes", "no"]).sum()
    return set(share[share > SURVEY_THRESHOLD].index)


def main() -> None:
    rng = np.random.default_rng(SEED)
    templates = pd.read_csv(TEMPLATES, dtype=str, keep_default_na=False, encoding="utf-8")
    questionnaire = pd.read_csv(QUESTIONNAIRE, dtype=str, keep_default_na=False, encoding="utf-8")
    category_of = dict(zip(questionnaire["stereotype_id"], questionnaire["category"], strict=True))
    special = LOW_KAPPA | LOW_RELEVANCE | UNANIMOUS_STEREO | RELEVANCE_AT_THRESHOLD
    assert special <= set(templates["template_id"]), special - set(templates["template_id"])

    rows = [row for template_id in templates["template_id"] for row in template_rows(template_id, rng)]
    pd.DataFrame(rows).to_csv(OUTPUT, index=False, encoding="utf-8", lineterminator="\n")

    # ---- report and check what was written
    ratings = pd.read_csv(OUTPUT, dtype={"relevance": "int64"}, keep_default_na=False, encoding="utf-8")
    assert list(ratings.columns) == ["template_id", "item_id", "annotator_id", "target_label", "relevance"]
    assert not ratings.duplicated(["template_id", "item_id", "annotator_id"]).any()
    assert ratings["target_label"].isin(LABEL.values()).all() and ratings["relevance"].isin([1, 2, 3]).all()
    accepted = accepted_stereotypes()
    figures = []
    for template_id, group in ratings.groupby("template_id", sort=False):
        assert group["item_id"].nunique() == ITEMS_PER_TEMPLATE, template_id
        assert (group.groupby("item_id")["annotator_id"].apply(sorted).map(tuple) == ANNOTATORS).all(), template_id
        stereotype_id = templates.loc[templates["template_id"] == template_id, "stereotype_id"].item()
        figures.append(
            {
                "template_id": template_id,
                "stereotype_id": stereotype_id,
                "category": category_of[stereotype_id],
                "accepted": stereotype_id in accepted,
                "kappa": kappa_of(group),
                "mean_relevance": group["relevance"].mean(),
            }
        )
    figures = pd.DataFrame(figures).set_index("template_id")
    assert list(figures.index) == list(templates["template_id"])

    def passes(row: pd.Series, undefined_kappa_passes: bool) -> bool:
        kappa_ok = row.kappa >= MIN_KAPPA if not math.isnan(row.kappa) else undefined_kappa_passes
        return row.accepted and kappa_ok and row.mean_relevance >= MIN_RELEVANCE

    def reason(row: pd.Series) -> str:
        if not row.accepted:
            return "stereotype not accepted by the survey"
        if math.isnan(row.kappa):
            return "kappa undefined (single label), builder decides"
        if row.kappa < MIN_KAPPA:
            return "kappa < 0.2"
        if row.mean_relevance < MIN_RELEVANCE:
            return "mean relevance < 1.5"
        return ""

    print(f"{len(ratings)} synthetic ratings of {len(figures)} templates, seed {SEED}")
    print(f"{'template':<11} {'category':<24} {'kappa':>6} {'relev':>6}  outcome")
    for template_id, row in figures.iterrows():
        kappa = "  nan" if math.isnan(row.kappa) else f"{row.kappa:6.3f}"
        print(f"{template_id:<11} {row.category:<24} {kappa:>6} {row.mean_relevance:6.3f}  {reason(row) or 'kept'}")

    good = figures.drop(index=list(special))
    assert (good["kappa"] >= 0.4).all() and (good["mean_relevance"] >= 2).all()
    low_kappa = figures.loc[sorted(LOW_KAPPA)]
    assert len(low_kappa) >= 3 and low_kappa["category"].nunique() >= 3
    assert (low_kappa["kappa"] < MIN_KAPPA).all() and (low_kappa["mean_relevance"] >= 2).all()
    assert low_kappa["accepted"].all()
    low_relevance = figures.loc[sorted(LOW_RELEVANCE)]
    assert len(low_relevance) >= 3 and (low_relevance["kappa"] >= 0.4).all()
    assert (low_relevance["mean_relevance"] < MIN_RELEVANCE).all() and low_relevance["accepted"].all()
    for template_id in UNANIMOUS_STEREO:
        assert math.isnan(figures.at[template_id, "kappa"])
        assert (ratings.loc[ratings["template_id"] == template_id, "target_label"] == "stereo").all()
        assert figures.at[template_id, "mean_relevance"] >= 2 and figures.at[template_id, "accepted"]
    for template_id in RELEVANCE_AT_THRESHOLD:
        assert figures.at[template_id, "mean_relevance"] == MIN_RELEVANCE and figures.at[template_id, "kappa"] >= 0.4
    # Some templates belong to stereotypes the survey drops.
    assert (~figures["accepted"]).sum() >= 5
    # Whatever the builder makes of the single-label kappa, every category keeps at least two templates.
    for undefined_kappa_passes in (False, True):
        kept = figures[figures.apply(passes, axis=1, undefined_kappa_passes=undefined_kappa_passes)]
        per_category = Counter(kept["category"])
        assert len(per_category) == 16 and min(per_category.values()) >= 2, per_category
    kept = figures[figures.apply(passes, axis=1, undefined_kappa_passes=False)]
    print(
        f"kept {len(kept)} of {len(figures)} (single-label kappa counted as failing); "
        f"per category min {min(Counter(kept['category']).values())}; all checks passed"
    )


if __name__ == "__main__":
    main()
