"""PBBQ's and BBQ's scores one equation at a time over a samples table, for the evaluation tests: each is
:func:`pbbq.tasks.evaluation.metrics.scores` of the table's totals, as the metrics stage computes them."""

from __future__ import annotations

import pandas as pd

from pbbq.tasks.evaluation.metrics import _sum_columns, scores


def _totals(samples: pd.DataFrame) -> dict[str, float]:
    return _sum_columns(samples).sum().to_dict()


def accuracy(samples: pd.DataFrame) -> dict[str, float]:
    """PBBQ Eq. 1: the share of correct answers, per context condition (``ambig``, ``disambig``)."""
    result = scores(_totals(samples))
    return {"ambig": float(result["acc_amb"]), "disambig": float(result["acc_dis"])}


def ambiguous_bias(samples: pd.DataFrame, *, bounded: bool = False) -> float:
    """PBBQ Eq. 2 over the ambiguous examples: mean log p(biased) − log p(counter) as written, or with
    ``bounded`` the mean p(biased) − p(counter) of the normalised option probabilities, in [−1, 1]."""
    return float(scores(_totals(samples))["beta_amb_bounded" if bounded else "beta_amb"])


def delta_bias(samples: pd.DataFrame) -> float:
    """PBBQ Eq. 3: Acc(biased assignment) − Acc(counter-biased assignment) on the disambiguated examples."""
    return float(scores(_totals(samples))["delta_bias"])


def uncertainty(samples: pd.DataFrame) -> dict[str, float]:
    """PBBQ Eq. 4: mean normalised Shannon entropy of the three options, per context condition."""
    result = scores(_totals(samples))
    return {"ambig": float(result["uncertainty_amb"]), "disambig": float(result["uncertainty_dis"])}


def bbq_bias_scores(samples: pd.DataFrame) -> dict[str, float]:
    """BBQ's s_DIS, s_AMB and unscaled s_AMB (Parrish et al. 2022; the name-proxy paper's Eq. 1–2)."""
    result = scores(_totals(samples))
    return {name: float(result[name]) for name in ("s_dis", "s_amb", "s_amb_unscaled")}
