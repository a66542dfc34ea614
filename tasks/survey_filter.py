"""Survey filter: keep the stereotypes that more than 60 % of respondents know or believe (PBBQ §3.2, §5).

Per stereotype, the acceptance rate is the share of respondents who answered 'yes' (heard of or believe it)
among those who answered at all, with a Wilson score interval (statsmodels). Stereotypes above the threshold
are kept. The sample's margin of error follows Cochran (1977) for a proportion of 0.5 with the finite
population correction: 250 respondents of a population of 90 million give 0.062 at 95 % (PBBQ §5).
Acceptance is also broken down by each demographic column of Appendix E.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from .core.artifacts import StageOutput, count_reasons
from .core.inputs import DEMOGRAPHIC_COLUMNS, QUESTIONNAIRE, RESPONSES
from .core.schemas import STEREOTYPE
from .core.stage import Stage
from .imports import one_import_at_a_time


@dataclass(frozen=True)
class SurveyParams:
    threshold: float = 0.60
    """Keep a stereotype whose acceptance rate is strictly above this share (PBBQ §3.2)."""
    confidence: float = 0.95
    population: int = 90_000_000
    """Population the sample stands for (Iran, ~90 million; PBBQ §5)."""
    target_margin: float = 0.062
    """Warn when the sample's margin of error is over this (PBBQ §5 accepts 0.062)."""


def cochran_margin(n_respondents: int, population: int, confidence: float = 0.95, proportion: float = 0.5) -> float:
    """Margin of error of a sample of ``n_respondents`` for a proportion, Cochran (1977) with the finite
    population correction: z·√(p(1−p)/n)·√((N−n)/(N−1))."""
    if n_respondents < 1:
        raise ValueError("the survey has no respondents")
    if population < n_respondents:
        raise ValueError(f"the population ({population}) is smaller than the survey's {n_respondents} respondents")
    with one_import_at_a_time():
        from scipy.stats import norm  # scipy loads only when a survey is filtered

    z = norm.ppf(1 - (1 - confidence) / 2)
    fpc = math.sqrt((population - n_respondents) / (population - 1)) if population > 1 else 0.0
    return float(z * math.sqrt(proportion * (1 - proportion) / n_respondents) * fpc)


def acceptance_rates(questionnaire: pd.DataFrame, responses: pd.DataFrame, params: SurveyParams) -> pd.DataFrame:
    """One row per stereotype: respondents who answered, those who accept, the rate and its Wilson interval."""
    answers = responses[questionnaire["stereotype_id"].tolist()]
    n_accepting = (answers == "yes").sum().astype("int64")
    n_respondents = answers.isin(["yes", "no"]).sum().astype("int64")
    with one_import_at_a_time():
        from statsmodels.stats.proportion import proportion_confint  # statsmodels loads only when a survey is filtered

    with np.errstate(divide="ignore", invalid="ignore"):  # a stereotype nobody answered: NaN, not a warning
        ci_low, ci_high = proportion_confint(
            n_accepting.to_numpy(), n_respondents.to_numpy(), alpha=1 - params.confidence, method="wilson"
        )
    rates = pd.DataFrame(
        {
            "stereotype_id": n_accepting.index,
            "n_respondents": n_respondents.to_numpy(),
            "n_accepting": n_accepting.to_numpy(),
            "acceptance": (n_accepting / n_respondents.where(n_respondents > 0)).to_numpy(),
            "ci_low": ci_low,
            "ci_high": ci_high,
        }
    )
    return questionnaire.merge(rates, on="stereotype_id", how="left", validate="one_to_one")


def acceptance_by_demographic(questionnaire: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Acceptance of every stereotype within each level of each demographic column (Appendix E): a row per
    stereotype (in id order) and level (in order) with answers. Counted on the responses as they are, a column per
    stereotype: per demographic, the respondents of each level (a level × respondent indicator) times their answers."""
    answers = responses[questionnaire["stereotype_id"].tolist()]
    order = np.argsort(answers.columns.to_numpy(dtype=object), kind="stable")
    ids = answers.columns.to_numpy(dtype=object)[order]
    answered = (answers != "").to_numpy(dtype=np.int64)[:, order]
    accepting = (answers == "yes").to_numpy(dtype=np.int64)[:, order]
    parts = []
    for column in DEMOGRAPHIC_COLUMNS:
        codes, levels = pd.factorize(responses[column], sort=True)  # a missing level is -1: in no level
        members = (codes == np.arange(len(levels))[:, None]).astype(np.int64)
        sizes, accepted = (members @ answered).T, (members @ accepting).T  # stereotype × level
        stereotype, level = np.nonzero(sizes)
        parts.append(
            pd.DataFrame(
                {
                    "stereotype_id": ids[stereotype],
                    "demographic": column,
                    "level": levels.astype(str)[level],
                    "n_respondents": sizes[stereotype, level],
                    "n_accepting": accepted[stereotype, level],
                    "acceptance": accepted[stereotype, level] / sizes[stereotype, level],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


ACCEPTANCE_BY_DEMOGRAPHIC = pa.schema(
    [
        ("stereotype_id", pa.string()),
        ("demographic", pa.string()),
        ("level", pa.string()),
        ("n_respondents", pa.int64()),
        ("n_accepting", pa.int64()),
        ("acceptance", pa.float64()),
    ]
)
OUTPUTS: dict[str, pa.Schema] = {
    "stereotypes": STEREOTYPE,
    "dropped": STEREOTYPE,
    "acceptance_by_demographic": ACCEPTANCE_BY_DEMOGRAPHIC,
}
"""The survey's tables: every stereotype with its acceptance and decision, those dropped, acceptance per group."""


def survey_filter(questionnaire: pd.DataFrame, responses: pd.DataFrame, params: SurveyParams) -> StageOutput:
    """Acceptance per stereotype, the keep/drop decision with its reason, and the survey's margin of error."""
    stereotypes = acceptance_rates(questionnaire, responses, params)
    no_answers = stereotypes["n_respondents"] == 0
    accepted = stereotypes["acceptance"] > params.threshold
    stereotypes["kept"] = accepted & ~no_answers
    stereotypes["reason"] = ""
    stereotypes.loc[~accepted, "reason"] = f"acceptance_at_or_below_{params.threshold:g}"
    stereotypes.loc[no_answers, "reason"] = "no_answers"
    margin = cochran_margin(len(responses), params.population, params.confidence)
    warnings = []
    if margin > params.target_margin:
        warnings.append(
            f"margin of error {margin:.4f} of {len(responses)} respondents is over the target {params.target_margin}"
        )
    dropped = stereotypes[~stereotypes["kept"]]
    report = {
        "stage": "survey_filter",
        "parameters": asdict(params),
        "counts": {"in": len(stereotypes), "out": int(stereotypes["kept"].sum()), "respondents": len(responses)},
        "dropped": {"total": len(dropped), "by_reason": count_reasons(dropped["reason"])},
        "drops": [
            {"stereotype_id": row.stereotype_id, "reason": row.reason, "acceptance": row.acceptance}
            for row in dropped.itertuples()
        ],
        "margin_of_error": margin,
        "warnings": warnings,
    }
    by_demographic = acceptance_by_demographic(questionnaire, responses)
    return StageOutput(
        tables={
            "stereotypes": stereotypes,
            "dropped": dropped,
            "acceptance_by_demographic": by_demographic,
        },
        schemas=OUTPUTS,
        report=report,
    )


STAGE = Stage(
    "02_survey",
    "survey_filter",
    survey_filter,
    inputs={"questionnaire": QUESTIONNAIRE, "responses": RESPONSES},
    outputs=OUTPUTS,
    params=SurveyParams,
    ranges={"threshold": (0, 1), "confidence": (0.5, 0.999999), "population": (1, None)} | {"target_margin": (1e-9, 1)},
    drops=("dropped",),
    words=("stereotypes surveyed", "accepted", "stereotypes the survey did not accept"),
    funnel={"surveyed": "Stereotypes in the survey", "accepted": "Accepted by the survey"},
    artifacts={
        "survey-filter": (
            "stereotypes",
            ("stereotype_id", "category", "acceptance", "ci_low", "ci_high", "kept", "reason"),
            "Acceptance per stereotype (keep > threshold)",
        )
    },
    imports=("statsmodels.stats.proportion",),
)
