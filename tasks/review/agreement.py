"""Agreement of a round's reviewers, per round and question: Krippendorff's alpha (nominal; the maintained
``krippendorff`` package) and, beside it, Fleiss' kappa over the items every one of ``overlap`` reviewers answered
and the mean of Cohen's kappa over each pair of reviewers (statsmodels), with the numbers of items, reviewers and
ratings. A value that cannot be computed (one category only, no item with two answers) is None with the reason."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ..imports import one_import_at_a_time
from .decisions import answers_of
from .items import QUESTIONS, base_kind

AGREEMENT_COLUMNS = [
    "round_id",
    "kind",
    "question",
    "n_items",
    "n_reviewers",
    "n_ratings",
    "alpha",
    "fleiss_kappa",
    "cohen_kappa",
    "note",
]

VERDICT = "verdict"
"""The question every item is asked: accept, fix or reject."""


def _matrix(ratings: pd.DataFrame, column: str) -> tuple[np.ndarray, list[str], list[str]]:
    """Reviewers × items of category codes (nan: not rated), the items rated at least twice."""
    answered = ratings[ratings[column] != ""]
    twice = answered.groupby("item_id")["reviewer"].transform("size") >= 2
    answered = answered[twice]
    categories = sorted(answered[column].unique())
    reviewers = sorted(answered["reviewer"].unique())
    items = sorted(answered["item_id"].unique())
    matrix = np.full((len(reviewers), len(items)), np.nan)
    at = {c: pd.Categorical(answered[c], categories=v).codes for c, v in (("reviewer", reviewers), ("item_id", items))}
    matrix[at["reviewer"], at["item_id"]] = pd.Categorical(answered[column], categories=categories).codes
    return matrix, reviewers, categories


def krippendorff_alpha(matrix: np.ndarray, n_categories: int) -> float | None:
    """Nominal alpha of a reviewers × items matrix (nan: not rated); None when undefined (one category)."""
    with one_import_at_a_time():
        import krippendorff
    if n_categories < 2:
        return None
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))


def _fleiss(matrix: np.ndarray, n_categories: int) -> float | None:
    with one_import_at_a_time():
        from statsmodels.stats.inter_rater import fleiss_kappa
    counts = (~np.isnan(matrix)).sum(axis=0)
    if not len(counts):
        return None
    full = matrix[:, counts == counts.max()]
    table = np.stack([(full == c).sum(axis=0) for c in range(n_categories)], axis=1)
    value = float(fleiss_kappa(table, method="fleiss")) if table.shape[0] and n_categories > 1 else math.nan
    return None if math.isnan(value) else value


def _cohen(matrix: np.ndarray, n_categories: int) -> float | None:
    """Mean of Cohen's kappa over the reviewer pairs with items in common, weighted by those items."""
    with one_import_at_a_time():
        from statsmodels.stats.inter_rater import cohens_kappa
    values, weights = [], []
    for a, b in itertools.combinations(range(matrix.shape[0]), 2):
        both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
        if both.sum() < 2:
            continue
        table = np.zeros((n_categories, n_categories))
        np.add.at(table, (matrix[a, both].astype(int), matrix[b, both].astype(int)), 1)
        with np.errstate(invalid="ignore", divide="ignore"):  # a pair that used one category only: nan, skipped
            kappa = float(cohens_kappa(table, return_results=False))
        if not math.isnan(kappa):
            values.append(kappa)
            weights.append(int(both.sum()))
    return float(np.average(values, weights=weights)) if values else None


def agreement(decisions: pd.DataFrame) -> pd.DataFrame:
    """A row per round, kind and question (the verdict first, then the kind's own questions)."""
    rows = []
    if decisions.empty:
        return pd.DataFrame(columns=AGREEMENT_COLUMNS)
    wide = answers_of(decisions)
    for (round_id, kind), ratings in wide.groupby(["round_id", "kind"], sort=True):
        for question in (VERDICT, *(q.key for q in QUESTIONS[base_kind(kind)])):
            if question not in ratings:
                continue
            matrix, reviewers, categories = _matrix(ratings, question)
            n_items = matrix.shape[1]
            note = ""
            if n_items == 0:
                note = "no item answered by two reviewers"
            elif len(categories) < 2:
                note = f"every answer was {categories[0]!r}: agreement is undefined"
            rows.append(
                {
                    "round_id": round_id,
                    "kind": kind,
                    "question": question,
                    "n_items": n_items,
                    "n_reviewers": len(reviewers),
                    "n_ratings": int((~np.isnan(matrix)).sum()),
                    "alpha": krippendorff_alpha(matrix, len(categories)) if n_items else None,
                    "fleiss_kappa": _fleiss(matrix, len(categories)) if n_items and len(categories) > 1 else None,
                    "cohen_kappa": _cohen(matrix, len(categories)) if n_items and len(categories) > 1 else None,
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def below(table: pd.DataFrame, min_alpha: float) -> pd.DataFrame:
    """The rows whose alpha is under ``min_alpha``: a round to report, not to use silently (an undefined alpha,
    every answer the same, is shown as such, not as a disagreement)."""
    alpha = pd.to_numeric(table["alpha"], errors="coerce")
    return table[alpha.notna() & (alpha < min_alpha)]
