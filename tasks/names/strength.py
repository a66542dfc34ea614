"""How strongly a group's first names stand for it (the names stage, docs/architecture.md §1): a name proxy tests a
group only if a reader can tell the group from its names (Obscured but Not Erased §4.1 chose names "typical of"
each group; this measures it).

**The measure.** Per language and bias category, a classifier is trained on the name table's names of the groups
the category's examples name, each name labelled with its group, over the name's character n-grams
(``TfidfVectorizer(analyzer='char_wb', ngram_range=(2, 4))`` + ``LogisticRegression``), and scored by stratified
k-fold cross-validation repeated with shuffled folds (seeded): a group's *strength* is the share of its held-out
names the classifier gives back to it (its recall), averaged over the repeats. A group whose names share nothing
with each other that the other groups' names lack is at chance, ``1 / number of groups``.

**The threshold.** A group is strong when its strength reaches chance plus ``margin``. The default margin, 0.10,
asks that the classifier give back at least one more of a group's ten names than chance would. It is a low bar on
purpose: ten names are little evidence (one split's recall moves by a tenth per name, which the repeats average
out, but not the choice of the ten names), and character n-grams miss what a reader knows of a name, so the
measure can only show that a group's names have nothing in common, not that a reader recognises them. An example
is named only when both of its groups are strong; the others are left out of ``fa-names`` with the reason
``weak_proxy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

import numpy as np
import pandas as pd
import pyarrow as pa

from ..imports import one_import_at_a_time

FOLDS = 5
"""Folds of the cross-validation: two of a group's ten names are held out at a time."""
REPEATS = 10
"""Repeats with reshuffled folds, averaged: one split of ten names alone moves a recall by a tenth."""
MEASURE = (
    f"recall of a {FOLDS}-fold cross-validated classifier (char_wb 2-4-gram TF-IDF + logistic regression) "
    f"over the name table's names of the category's groups, averaged over {REPEATS} seeded repeats"
)
PROXY_STRENGTH = pa.schema(
    [
        ("lang", pa.string()),
        ("category", pa.string()),
        ("group", pa.string()),
        ("n_groups", pa.int64()),
        ("n_names", pa.int64()),
        ("strength", pa.float64()),
        ("chance", pa.float64()),
        ("threshold", pa.float64()),
        ("strong", pa.bool_()),
    ]
)
"""One row per language, category and group: its names' strength, chance, the threshold and the decision."""


def _recalls(names: pd.Series, groups: pd.Series, seed: int) -> pd.Series:
    """Per group, the cross-validated recall of its names, averaged over the repeats (module docstring)."""
    with one_import_at_a_time():
        from sklearn import config_context
        from sklearn.feature_extraction.text import TfidfVectorizer  # scikit-learn loads only when strength is measured
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import RepeatedStratifiedKFold
        from sklearn.pipeline import make_pipeline
        from threadpoolctl import threadpool_limits

    texts, labels = names.to_numpy(dtype=object), groups.to_numpy(dtype=object)
    folds = min(FOLDS, int(groups.value_counts().min()))
    hits, seen = np.zeros(len(texts)), np.zeros(len(texts))
    splits = RepeatedStratifiedKFold(n_splits=folds, n_repeats=REPEATS, random_state=seed)
    # A fit is small (about 100 names by 1,000 n-grams): BLAS threads would only wait for each other, and on a
    # busy machine they cost several times the fit itself.
    with (
        threadpool_limits(limits=1, user_api="blas"),
        config_context(assume_finite=True, skip_parameter_validation=True),
    ):
        for train, test in splits.split(texts, labels):
            model = make_pipeline(
                TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)), LogisticRegression(C=10.0, max_iter=1000)
            )
            model.fit(texts[train], labels[train])
            hits[test] += model.predict(texts[test]) == labels[test]
            seen[test] += 1
    return pd.Series(hits / seen).groupby(labels).mean()


def proxy_strength(
    table: pd.DataFrame, groups: Mapping[tuple[str, str], Set[str]], margin: float, seed: int
) -> pd.DataFrame:
    """:data:`PROXY_STRENGTH` for the name table ``table`` and the groups each (language, category) names; a
    category with one group has nothing to tell its names from, and that group is not strong."""
    rows = []
    for (lang, category), named in sorted(groups.items()):
        names = table[(table["lang"] == lang) & table["group"].isin(named)]
        chance = 1 / len(named)
        recalls = _recalls(names["name"], names["group"], seed) if len(named) > 1 else pd.Series(dtype=float)
        for group in sorted(named):
            strength, threshold = round(float(recalls.get(group, 0.0)), 4), round(chance + margin, 4)
            rows.append(
                {
                    "lang": lang,
                    "category": category,
                    "group": group,
                    "n_groups": len(named),
                    "n_names": int((names["group"] == group).sum()),
                    "strength": strength,
                    "chance": round(chance, 4),
                    "threshold": threshold,
                    "strong": len(named) > 1 and strength >= threshold,
                }
            )
    return pd.DataFrame(rows, columns=PROXY_STRENGTH.names)
