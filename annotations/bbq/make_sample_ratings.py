"""Make ratings-pakistan-sample.csv: ratings WRITTEN FOR THE SAMPLE, standing in for three annotators of the
adaptation sheet (adapt-sheet-pakistan-sample.csv); no person rated anything.

Every template the sheet builds (DT, TM, NA; SR rows are removed before annotation) gets 4 items rated by A1, A2, A3:
which group an item targets (stereo | nonstereo | neither) and its cultural relevance in Pakistan, 1–3 (PakBBQ §3.2).
The design, checked below with the gate's own function: every template passes, except LOW_RELEVANCE (annotators
agree, relevance < 1.5: a British rude-guest stereotype barely circulates in Pakistan) and LOW_KAPPA (relevance high,
annotators disagree on the target, kappa < 0.2): an NA row is gated like the rest.

Run from the repository root:  python annotations/bbq/make_sample_ratings.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pbbq.tasks.kappa_gate import fleiss_kappa_per_template

HERE = Path(__file__).resolve().parent
SHEET = HERE / "adapt-sheet-pakistan-sample.csv"
OUTPUT = HERE / "ratings-pakistan-sample.csv"
ANNOTATORS = ("A1", "A2", "A3")
LABEL = {"S": "stereo", "O": "nonstereo", "N": "neither"}
AGREEING = ["SSS", "SSS", "NNN", "SSN"]
DISAGREEING = ["SSN", "SNO", "NSO", "SON"]
RELEVANT = ["333", "323", "332", "223"]
IRRELEVANT = ["111", "121", "112", "111"]
LOW_RELEVANCE = {"Nationality-1"}
LOW_KAPPA = {"PK-NA-3"}


def template_rows(template_id: str) -> list[dict]:
    labels = DISAGREEING if template_id in LOW_KAPPA else AGREEING
    relevance = IRRELEVANT if template_id in LOW_RELEVANCE else RELEVANT
    return [
        {
            "template_id": template_id,
            "item_id": f"{template_id}-I{item + 1}",
            "annotator_id": annotator,
            "target_label": LABEL[labels[item][k]],
            "relevance": int(relevance[item][k]),
        }
        for item in range(len(labels))
        for k, annotator in enumerate(ANNOTATORS)
    ]


def main() -> None:
    sheet = pd.read_csv(SHEET, dtype=str, keep_default_na=False)
    built = sheet.loc[sheet["class"] != "SR", "template_id"]
    ratings = pd.DataFrame([row for template_id in built for row in template_rows(template_id)])
    figures = fleiss_kappa_per_template(ratings).set_index("template_id")
    failing = figures[(figures["kappa"] < 0.2) | (figures["mean_relevance"] < 1.5)].index
    assert set(failing) == LOW_RELEVANCE | LOW_KAPPA, failing
    ratings.to_csv(OUTPUT, index=False)
    print(figures[["kappa", "mean_relevance"]].round(3).to_string())


if __name__ == "__main__":
    main()
