"""The names stage's report: counts in and out, per sub-seed and per category, and the examples not covered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from ..core.artifacts import count_reasons
from .params import STAGE_NAME, NamesParams


def names_report(
    examples: pd.DataFrame,
    mapped: pd.DataFrame,
    unmapped: pd.DataFrame,
    per_seed: Sequence[dict[str, Any]],
    params: NamesParams,
) -> dict[str, Any]:
    """Counts in and out, per sub-seed (distinct names drawn, redraws, eras and gender pairs) and per category, the
    genders of the references, the patterns used and the examples no name table covers, counted by reason
    (``not_covered``: they stay in fa, and are not ``dropped``; the weak proxies are, from the ``weak_proxy``
    table; each one's entities and detail are in the ``unmapped`` table, :data:`UNMAPPED`). ``mapped``: the
    variants of one sub-seed, a row per mapped example."""
    seeds = [row["sub_seed"] for row in per_seed]
    per_category = {}
    for category in sorted(set(examples["category"])):
        n_mapped = int((mapped["category"] == category).sum())
        per_category[str(category)] = {
            "in": int((examples["category"] == category).sum()),
            "mapped": n_mapped,
            "unmapped": int((unmapped["category"] == category).sum()),
            "out": n_mapped * len(seeds),
        }
    genders = pd.Series([g for genders in mapped["_reference_genders"] for g in genders], dtype="object")
    patterns = pd.Series([pattern for used in mapped["_patterns"] for pattern in used], dtype="object")
    return {
        "stage": STAGE_NAME,
        "parameters": asdict(params),
        "sub_seeds": list(seeds),
        "counts": {"in": len(examples), "out": len(mapped) * len(seeds), "mapped": len(mapped)},
        "not_covered": {"total": len(unmapped), "by_reason": count_reasons(unmapped["reason"])},
        "per_sub_seed": list(per_seed),
        "per_category": per_category,
        "reference_genders": count_reasons(genders),
        "patterns": count_reasons(patterns),
    }
