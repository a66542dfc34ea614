"""The survey filter (PBBQ §3.2, §5, Appendix E) on small hand-made tables, every figure worked by hand.

Expected values are written out, not computed with the code under test: Cochran's margin
z·√(p(1−p)/n)·√((N−n)/(N−1)) and the Wilson interval (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n) with
z = 1.959963984540054 at 95 % and 1.6448536269514722 at 90 %.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd
import pytest
from statsmodels.stats.proportion import samplesize_confint_proportion

from pbbq.tasks.core.inputs import DEMOGRAPHIC_COLUMNS, QUESTIONNAIRE_COLUMNS
from pbbq.tasks.core.schemas import STEREOTYPE
from pbbq.tasks.survey_filter import (
    ACCEPTANCE_BY_DEMOGRAPHIC,
    SurveyParams,
    acceptance_by_demographic,
    cochran_margin,
    survey_filter,
)


def _questionnaire(ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stereotype_id": ids,
            "category": "Age",
            "statement_fa": "جمله",
            "statement_en": "statement",
            "target_group": "پیرها",
            "non_target_groups": [["جوان‌ها"]] * len(ids),
            "source": "expert",
        }
    )


def _responses(answers: dict[str, list[str]], **demographics: list[str]) -> pd.DataFrame:
    """Respondents R0.. with every demographic 'x' unless given, then one column of answers per stereotype."""
    n = len(next(iter(answers.values())))
    frame = pd.DataFrame({"respondent_id": [f"R{i}" for i in range(n)]})
    for column in DEMOGRAPHIC_COLUMNS:
        frame[column] = demographics.get(column, ["x"] * n)
    return pd.concat([frame, pd.DataFrame(answers)], axis=1)


def _nan_to_none(value: Any) -> Any:
    """The same structure with NaN as None, so that a report holding NaN compares with ==."""
    if isinstance(value, dict):
        return {key: _nan_to_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def test_parameters_are_the_papers() -> None:
    assert SurveyParams() == SurveyParams(threshold=0.60, confidence=0.95, population=90_000_000, target_margin=0.062)


def test_cochran_margin_of_the_paper() -> None:
    # 1.959964 · √(0.25/250) · √((90e6 − 250)/(90e6 − 1)) = 0.0619794175
    margin = cochran_margin(250, 90_000_000)
    assert margin == pytest.approx(0.06197941749208309, rel=1e-12)
    assert round(margin, 3) == 0.062
    # statsmodels' sample size for that half-width at p = 0.5 is the 250 respondents back
    assert samplesize_confint_proportion(0.5, margin) == pytest.approx(250, rel=1e-3)


def test_cochran_margin_small_population_corrects_with_n_minus_one() -> None:
    # 1.959964 · √(0.25/10) · √((20 − 10)/(20 − 1)) = 0.2248233; with N instead of N − 1 it would be 0.2191306
    assert cochran_margin(10, 20) == pytest.approx(0.22482328793656342, rel=1e-12)
    # 2 of 3: 1.959964 · √(0.25/2) · √(1/2)
    assert cochran_margin(2, 3) == pytest.approx(0.4899909961350136, rel=1e-12)


def test_cochran_margin_non_default_confidence_and_proportion() -> None:
    # 90 %: 1.644854 · √(0.25/250) · √((90e6 − 250)/(90e6 − 1)) = 0.0520148
    assert cochran_margin(250, 90_000_000, confidence=0.90) == pytest.approx(0.052014766833644845, rel=1e-12)
    # p = 0.2: 1.959964 · √(0.16/100) · √(900/999) = 0.0744126
    assert cochran_margin(100, 1000, proportion=0.2) == pytest.approx(0.07441261949252478, rel=1e-12)


def test_cochran_margin_with_one_respondent_none_and_the_whole_population() -> None:
    # one respondent of 90 million: 1.959964 · √0.25 · √((90e6 − 1)/(90e6 − 1)) = 0.979982
    assert cochran_margin(1, 90_000_000) == pytest.approx(0.979981992270027, rel=1e-12)
    with pytest.raises(ValueError, match=r"^the survey has no respondents$"):
        cochran_margin(0, 90_000_000)
    assert cochran_margin(250, 250) == 0.0  # the whole population: no sampling error
    assert cochran_margin(1, 1) == 0.0  # the whole population of one (N − 1 = 0 is not divided by)
    # one of two: 1.959964 · √0.25 · √((2 − 1)/(2 − 1)) = 0.979982
    assert cochran_margin(1, 2) == pytest.approx(0.979981992270027, rel=1e-12)
    with pytest.raises(ValueError, match=r"^the population \(249\) is smaller than the survey's 250 respondents$"):
        cochran_margin(250, 249)


def test_threshold_at_and_just_past_the_boundary() -> None:
    """Kept when strictly above 60 % (PBBQ §3.2): 600 of 1,000 is dropped, 601 kept."""
    answers = {
        "BELOW": ["yes"] * 599 + ["no"] * 401,
        "AT": ["yes"] * 600 + ["no"] * 400,
        "ABOVE": ["yes"] * 601 + ["no"] * 399,
    }
    output = survey_filter(_questionnaire(list(answers)), _responses(answers), SurveyParams())
    table = output["stereotypes"].set_index("stereotype_id")
    assert table.loc["AT", "acceptance"] == 0.6
    assert table["kept"].to_dict() == {"BELOW": False, "AT": False, "ABOVE": True}
    assert table["reason"].to_dict() == {
        "BELOW": "acceptance_at_or_below_0.6",
        "AT": "acceptance_at_or_below_0.6",
        "ABOVE": "",
    }
    # Wilson 95 % of 601/1000: 0.5703182 .. 0.6309087
    assert table.loc["ABOVE", "ci_low"] == pytest.approx(0.5703182462412869, rel=1e-9)
    assert table.loc["ABOVE", "ci_high"] == pytest.approx(0.6309087485446309, rel=1e-9)
    # the threshold is a parameter, its value in the reason
    other = survey_filter(_questionnaire(list(answers)), _responses(answers), SurveyParams(threshold=0.599))
    reasons = other["stereotypes"].set_index("stereotype_id")["reason"].to_dict()
    assert reasons == {"BELOW": "acceptance_at_or_below_0.599", "AT": "", "ABOVE": ""}


ANSWERS = {
    "S1": ["yes"] * 7 + ["no"] * 3,  # 0.7: kept
    "S2": ["yes"] * 6 + ["no"] * 4,  # exactly 0.6: dropped (kept is strictly above)
    "S3": ["yes"] * 6 + ["no"] * 2 + ["", ""],  # 6 of 8 answered = 0.75: skipped cells leave the denominator
    "S4": [""] * 10,  # nobody answered
    "S5": ["yes"] + [""] * 9,  # one answer: 1.0, kept
    "S6": ["no"] * 3 + [""] * 7,  # 0.0
}


def test_every_figure_decision_and_reason() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stereotype nobody answered gives NaN, not a RuntimeWarning
        output = survey_filter(_questionnaire(list(ANSWERS)), _responses(ANSWERS), SurveyParams())
    table = output["stereotypes"]
    figure_columns = ["n_respondents", "n_accepting", "acceptance", "ci_low", "ci_high", "kept", "reason"]
    assert list(table.columns) == [*QUESTIONNAIRE_COLUMNS, *figure_columns]
    assert list(table.index) == list(range(6))
    assert table["n_respondents"].dtype == "int64" and table["n_accepting"].dtype == "int64"
    figures = table.set_index("stereotype_id")
    assert figures["n_respondents"].to_dict() == {"S1": 10, "S2": 10, "S3": 8, "S4": 0, "S5": 1, "S6": 3}
    assert figures["n_accepting"].to_dict() == {"S1": 7, "S2": 6, "S3": 6, "S4": 0, "S5": 1, "S6": 0}
    assert figures["acceptance"].drop("S4").to_dict() == {"S1": 0.7, "S2": 0.6, "S3": 0.75, "S5": 1.0, "S6": 0.0}
    assert math.isnan(figures.loc["S4", "acceptance"])
    assert figures["kept"].to_dict() == {"S1": True, "S2": False, "S3": True, "S4": False, "S5": True, "S6": False}
    assert figures["reason"].to_dict() == {
        "S1": "",
        "S2": "acceptance_at_or_below_0.6",
        "S3": "",
        "S4": "no_answers",
        "S5": "",
        "S6": "acceptance_at_or_below_0.6",
    }
    # Wilson 95 %: 7/10 → 0.3967781 .. 0.8922087; 1/1 → 0.2065493 .. 1; 0/3 → 0 .. 0.5614970; 0/0 → none
    wilson = {"S1": (0.39677814746114537, 0.8922087325936989), "S5": (0.20654931437723745, 1.0)}
    wilson["S6"] = (0.0, 0.5614970317550455)
    for stereotype_id, (low, high) in wilson.items():
        assert figures.loc[stereotype_id, "ci_low"] == pytest.approx(low, rel=1e-9, abs=1e-12)
        assert figures.loc[stereotype_id, "ci_high"] == pytest.approx(high, rel=1e-9)
    assert math.isnan(figures.loc["S4", "ci_low"]) and math.isnan(figures.loc["S4", "ci_high"])
    pd.testing.assert_frame_equal(output["dropped"], table[~table["kept"]])
    assert output.schemas == {
        "stereotypes": STEREOTYPE,
        "dropped": STEREOTYPE,
        "acceptance_by_demographic": ACCEPTANCE_BY_DEMOGRAPHIC,
    }


def test_every_report_field() -> None:
    output = survey_filter(_questionnaire(list(ANSWERS)), _responses(ANSWERS), SurveyParams())
    # 10 respondents of 90 million: 1.959964 · √(0.25/10) · √((90e6 − 10)/(90e6 − 1)) = 0.3098975
    margin = 0.3098975006574044
    assert output.report["margin_of_error"] == pytest.approx(margin, rel=1e-12)
    assert _nan_to_none(output.report) == {
        "stage": "survey_filter",
        "parameters": {"threshold": 0.6, "confidence": 0.95, "population": 90_000_000, "target_margin": 0.062},
        "counts": {"in": 6, "out": 3, "respondents": 10},
        "dropped": {"total": 3, "by_reason": {"acceptance_at_or_below_0.6": 2, "no_answers": 1}},
        "drops": [
            {"stereotype_id": "S2", "reason": "acceptance_at_or_below_0.6", "acceptance": 0.6},
            {"stereotype_id": "S4", "reason": "no_answers", "acceptance": None},
            {"stereotype_id": "S6", "reason": "acceptance_at_or_below_0.6", "acceptance": 0.0},
        ],
        "margin_of_error": output.report["margin_of_error"],
        "warnings": ["margin of error 0.3099 of 10 respondents is over the target 0.062"],
    }


def test_non_default_confidence_and_population_reach_the_interval_and_the_margin() -> None:
    params = SurveyParams(confidence=0.90, population=20, target_margin=0.3)
    output = survey_filter(_questionnaire(["S1"]), _responses({"S1": ANSWERS["S1"]}), params)
    row = output["stereotypes"].iloc[0]
    # Wilson 90 % of 7/10: 0.4416998 .. 0.8731234
    assert row["ci_low"] == pytest.approx(0.44169979586983504, rel=1e-9)
    assert row["ci_high"] == pytest.approx(0.8731234160968022, rel=1e-9)
    # 1.644854 · √(0.25/10) · √((20 − 10)/(20 − 1)) = 0.1886739
    assert output.report["margin_of_error"] == pytest.approx(1.6448536269514722 * math.sqrt(0.025 * 10 / 19))
    assert output.report["warnings"] == []  # 0.189 is within the target 0.3
    assert output.report["parameters"] == {"threshold": 0.6, "confidence": 0.9, "population": 20, "target_margin": 0.3}


def test_a_margin_on_the_target_is_no_warning() -> None:
    responses = _responses({"S1": ANSWERS["S1"]})
    margin = cochran_margin(10, 90_000_000)
    on_target = survey_filter(_questionnaire(["S1"]), responses, SurveyParams(target_margin=margin))
    assert on_target.report["warnings"] == []
    below = survey_filter(_questionnaire(["S1"]), responses, SurveyParams(target_margin=0.3))
    assert below.report["warnings"] == ["margin of error 0.3099 of 10 respondents is over the target 0.3"]


def test_a_repeated_stereotype_is_an_error_not_a_doubled_row() -> None:
    with pytest.raises(pd.errors.MergeError):
        survey_filter(_questionnaire(["S1", "S1"]), _responses({"S1": ANSWERS["S1"]}), SurveyParams())


def test_acceptance_by_each_demographic_column_leaves_blank_answers_out() -> None:
    """Appendix E's columns: one row per stereotype and level that has an answer, sorted; a skipped item counts
    for no level (S2 has no answer from anyone aged 55+, so that level has no row)."""
    answers = {"S1": ["yes", "no", "yes", ""], "S2": ["", "yes", "no", ""]}
    responses = _responses(answers, gender=["f", "m", "f", "m"], age_band=["55+", "18-24", "18-24", "55+"])
    table = acceptance_by_demographic(_questionnaire(["S1", "S2"]), responses)
    rows = []
    for column in DEMOGRAPHIC_COLUMNS:
        if column == "gender":
            rows += [("S1", column, "f", 2, 2), ("S1", column, "m", 1, 0)]
            rows += [("S2", column, "f", 1, 0), ("S2", column, "m", 1, 1)]
        elif column == "age_band":
            rows += [("S1", column, "18-24", 2, 1), ("S1", column, "55+", 1, 1), ("S2", column, "18-24", 2, 1)]
        else:
            rows += [("S1", column, "x", 3, 2), ("S2", column, "x", 2, 1)]
    expected = pd.DataFrame(rows, columns=["stereotype_id", "demographic", "level", "n_respondents", "n_accepting"])
    expected["acceptance"] = expected["n_accepting"] / expected["n_respondents"]
    pd.testing.assert_frame_equal(table, expected)
    output = survey_filter(_questionnaire(["S1", "S2"]), responses, SurveyParams())
    pd.testing.assert_frame_equal(output["acceptance_by_demographic"], expected)


def test_acceptance_by_demographic_sorts_stereotypes_by_id_and_a_blank_level_is_a_level() -> None:
    """Rows in stereotype id order (as text: S1, S10, S9), whatever the questionnaire's order, then level order; a
    respondent who left a demographic blank counts in the blank level, which sorts first."""
    answers = {"S9": ["yes", "no", "yes"], "S10": ["no", "", "yes"], "S1": ["", "yes", "no"]}
    table = acceptance_by_demographic(_questionnaire(list(answers)), _responses(answers, gender=["m", "", "f"]))
    gender = [["S1", "", 1, 1], ["S1", "f", 1, 0], ["S10", "f", 1, 1], ["S10", "m", 1, 0]]
    gender += [["S9", "", 1, 0], ["S9", "f", 1, 1], ["S9", "m", 1, 1]]
    columns = ["stereotype_id", "level", "n_respondents", "n_accepting"]
    assert table.query("demographic == 'gender'")[columns].values.tolist() == gender
    religion = table.query("demographic == 'religion'")
    assert religion[["stereotype_id", "n_respondents", "n_accepting"]].values.tolist() == [
        ["S1", 2, 1],
        ["S10", 2, 1],
        ["S9", 3, 2],
    ]
    assert religion["acceptance"].tolist() == [0.5, 0.5, 2 / 3]
