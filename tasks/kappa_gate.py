"""Annotation gate: keep a template only when its annotators agree and find it culturally relevant
(PakBBQ §3.2; PBBQ keeps only templates of accepted stereotypes, §3.2–§3.3).

Per template, Fleiss' kappa over the annotators' labels of the targeted group of its items (statsmodels), and
the mean cultural-relevance rating on the 1–3 scale. A template is dropped when its stereotype was not
accepted by the survey, when kappa < ``min_kappa`` (0.2) or when the mean relevance < ``min_relevance`` (1.5).

The single-label case: when every annotator gives every item the same one label, observed and chance
agreement are both 1 and Fleiss' kappa is 0/0 (statsmodels returns NaN). Here it is defined as 1.0, noted
``single_label_perfect_agreement``: the annotators agree completely on which group the template targets, which
is what the gate asks. A template whose items are rated by different numbers of annotators is an input error
(Fleiss' kappa needs a fixed number of raters per item; which annotators rate an item may differ, as in Fleiss
1971). Kappa and relevance on a threshold up to floating-point error count as on it, so they pass.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from .core.artifacts import StageOutput, count_reasons
from .core.inputs import RATINGS, TEMPLATES
from .core.schemas import TEMPLATE
from .core.stage import Stage, Table
from .imports import one_import_at_a_time

SINGLE_LABEL = "single_label_perfect_agreement"
OUTPUTS: dict[str, pa.Schema] = {"templates": TEMPLATE, "gated": TEMPLATE, "dropped": TEMPLATE}
"""The gate's tables: every template with its figures and decision, those kept, those dropped."""
FLOAT_TOLERANCE = 1e-9
"""Figures this close to a threshold count as on it (far below the gap between two kappas of real ratings)."""


@dataclass(frozen=True)
class GateParams:
    min_kappa: float = 0.2
    min_relevance: float = 1.5


GATE_RANGES = {"min_kappa": (-1, 1), "min_relevance": (1, 3)}
"""The values :class:`GateParams` accepts: a kappa, and a mean on the 1-3 relevance scale."""


class RatingsError(ValueError):
    """Ratings from which no kappa can be computed."""


def _check(ratings: pd.DataFrame) -> None:
    """A ``RatingsError`` when no Fleiss' kappa can be computed from one template's ratings."""
    if ratings.duplicated(["item_id", "annotator_id"]).any():
        raise RatingsError("an annotator rated the same item twice")
    per_item = ratings.groupby("item_id")["annotator_id"].nunique()
    if per_item.nunique() != 1:
        raise RatingsError(f"items rated by different numbers of annotators: {per_item.to_dict()}")
    if per_item.iloc[0] < 2:
        raise RatingsError("each item needs at least 2 annotators")


def _kappa(counts: np.ndarray) -> tuple[float, str]:
    """Fleiss' kappa and its note from a template's item × label counts (the labels it uses, in sorted order)."""
    if counts.shape[1] == 1:
        return 1.0, SINGLE_LABEL
    with one_import_at_a_time():
        from statsmodels.stats.inter_rater import fleiss_kappa  # statsmodels loads only when a gate runs

    return float(fleiss_kappa(counts, method="fleiss")), ""


def template_kappa(ratings: pd.DataFrame) -> tuple[float, str]:
    """Fleiss' kappa of one template's ratings (rows: item_id, annotator_id, target_label) and a note."""
    _check(ratings)
    return _kappa(pd.crosstab(ratings["item_id"], ratings["target_label"]).to_numpy())


FIGURES = ["template_id", "n_items", "n_annotators", "kappa", "kappa_note", "mean_relevance"]


def fleiss_kappa_per_template(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per template: items, annotators, Fleiss' kappa (with note) and mean relevance, as
    :func:`template_kappa` gives them one template at a time, from one grouping of all the ratings (the first
    template, in id order, whose ratings give no kappa is named in the error)."""
    if ratings.empty:
        return pd.DataFrame(columns=FIGURES)
    by_template = ratings.groupby("template_id", sort=True)
    figures = by_template.agg(
        n_items=("item_id", "nunique"), n_annotators=("annotator_id", "nunique"), mean_relevance=("relevance", "mean")
    )
    raters = ratings.groupby(["template_id", "item_id"])["annotator_id"].nunique().groupby(level=0)
    twice = ratings.duplicated(["template_id", "item_id", "annotator_id"]).groupby(ratings["template_id"]).any()
    failing = twice | (raters.nunique() != 1) | (raters.min() < 2)
    for template_id in failing.index[failing]:
        try:
            _check(by_template.get_group(template_id))
        except RatingsError as exc:
            raise RatingsError(f"template {template_id}: {exc}") from None
    counts = ratings.groupby(["template_id", "item_id", "target_label"]).size().unstack(fill_value=0)
    sizes = counts.groupby(level="template_id").size()
    blocks = np.split(counts.to_numpy(), sizes.cumsum().to_numpy()[:-1])
    kappas = dict(zip(sizes.index, (_kappa(block[:, block.any(axis=0)]) for block in blocks), strict=True))
    figures["kappa"] = [kappas[t][0] for t in figures.index]
    figures["kappa_note"] = [kappas[t][1] for t in figures.index]
    return figures.reset_index()[FIGURES].astype({"n_items": "int64", "n_annotators": "int64"})


def _below(value: float, threshold: float) -> bool:
    """``value < threshold``, unless the two differ only by floating-point error: a kappa of exactly 0.2
    (0.075 / 0.375, five items and four annotators) comes out of statsmodels as 0.19999999999999987, and
    PakBBQ §3.2 drops only what is below 0.2."""
    return threshold - value > FLOAT_TOLERANCE


def _reason(row: pd.Series, accepted: set[str], params: GateParams) -> str:
    """The first rule a template breaks, or '' when it passes."""
    if row.stereotype_id not in accepted:
        return "stereotype_not_accepted"
    if row.n_items == 0 or math.isnan(row.kappa):
        return "no_ratings"
    if _below(row.kappa, params.min_kappa):
        return "kappa_below_threshold"
    if _below(row.mean_relevance, params.min_relevance):
        return "relevance_below_threshold"
    return ""


def kappa_gate(
    templates: pd.DataFrame, ratings: pd.DataFrame, stereotypes: pd.DataFrame, params: GateParams
) -> StageOutput:
    """Every template with its figures and decision; the kept ones carry their stereotype's category."""
    figures = fleiss_kappa_per_template(ratings)
    table = templates.merge(figures, on="template_id", how="left", validate="one_to_one")
    table["n_items"] = table["n_items"].fillna(0).astype("int64")
    table["n_annotators"] = table["n_annotators"].fillna(0).astype("int64")
    table["kappa_note"] = table["kappa_note"].fillna("")
    table = table.merge(
        stereotypes[["stereotype_id", "category"]], on="stereotype_id", how="left", validate="many_to_one"
    )
    accepted = set(stereotypes.loc[stereotypes["kept"], "stereotype_id"])
    table["reason"] = table.apply(_reason, axis=1, accepted=accepted, params=params) if len(table) else ""
    table["kept"] = table["reason"] == ""
    dropped = table[~table["kept"]]
    report = {
        "stage": "kappa_gate",
        "parameters": asdict(params),
        "counts": {"in": len(table), "out": int(table["kept"].sum())},
        "dropped": {"total": len(dropped), "by_reason": count_reasons(dropped["reason"])},
        "drops": [
            {"template_id": r.template_id, "reason": r.reason, "kappa": r.kappa, "mean_relevance": r.mean_relevance}
            for r in dropped.itertuples()
        ],
        "single_label_templates": sorted(table.loc[table["kappa_note"] == SINGLE_LABEL, "template_id"]),
    }
    return StageOutput(
        tables={"templates": table, "gated": table[table["kept"]], "dropped": dropped},
        schemas=OUTPUTS,
        report=report,
    )


STAGE = Stage(
    "03_kappa_gate",
    "kappa_gate",
    kappa_gate,
    inputs={"templates": TEMPLATES, "ratings": RATINGS, "stereotypes": Table("02_survey", "stereotypes")},
    outputs=OUTPUTS,
    params=GateParams,
    ranges=GATE_RANGES,
    drops=("dropped",),
    words=("templates rated", "through the gate", "templates the gate stopped"),
    funnel={"templates": "Templates written", "gated": "Templates that passed the annotation gate"},
    artifacts={
        "kappa-gate": (
            "templates",
            ("template_id", "category", "kappa", "kappa_note", "mean_relevance", "kept", "reason"),
            "Fleiss' kappa and mean relevance per template",
        )
    },
    imports=("statsmodels.stats.inter_rater",),
)
