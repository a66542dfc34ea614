"""The survey filter, the kappa gate and instantiation on small hand-made tables, with figures worked by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from statsmodels.stats.proportion import samplesize_confint_proportion

from tasks.inputs import DEMOGRAPHIC_COLUMNS
from tasks.instantiate import EXAMPLES_PER_PAIR, InstantiateParams, answer_role, instantiate
from tasks.kappa_gate import SINGLE_LABEL, GateParams, RatingsError, kappa_gate, template_kappa
from tasks.survey_filter import SurveyParams, cochran_margin, survey_filter

PHRASES = ("نمی‌توان گفت", "مشخص نیست", "اطلاعات کافی نیست")


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


def _responses(answers: dict[str, list[str]], ages: list[str]) -> pd.DataFrame:
    n = len(ages)
    frame = pd.DataFrame({"respondent_id": [f"R{i}" for i in range(n)]})
    for column in DEMOGRAPHIC_COLUMNS:
        frame[column] = "x"
    frame["age_band"] = ages
    return pd.concat([frame, pd.DataFrame(answers)], axis=1)


def test_cochran_margin_of_the_paper() -> None:
    margin = cochran_margin(250, 90_000_000)
    assert round(margin, 3) == 0.062
    # statsmodels' sample size for that half-width at p = 0.5 is the 250 respondents back
    assert samplesize_confint_proportion(0.5, margin) == pytest.approx(250, rel=1e-3)
    assert cochran_margin(250, 250) == 0.0  # the whole population: no sampling error


def test_acceptance_wilson_threshold_and_demographics() -> None:
    answers = {
        "S1": ["yes"] * 7 + ["no"] * 3,  # 0.7: kept
        "S2": ["yes"] * 6 + ["no"] * 4,  # exactly 0.6: dropped (keep is strictly above)
        "S3": ["yes"] * 6 + ["no"] * 2 + ["", ""],  # 6 of 8 answered = 0.75: skipped cells leave the denominator
    }
    ages = ["18-24"] * 5 + ["55+"] * 5
    output = survey_filter(_questionnaire(["S1", "S2", "S3"]), _responses(answers, ages), SurveyParams())
    table = output["stereotypes"].set_index("stereotype_id")
    assert table.loc["S1", "acceptance"] == 0.7
    # Wilson 95 % interval of 7/10, worked by hand: 0.3968 .. 0.8922
    assert table.loc["S1", "ci_low"] == pytest.approx(0.3968, abs=1e-4)
    assert table.loc["S1", "ci_high"] == pytest.approx(0.8922, abs=1e-4)
    assert table["kept"].to_dict() == {"S1": True, "S2": False, "S3": True}
    assert table.loc["S3", "n_respondents"] == 8 and table.loc["S3", "acceptance"] == 0.75
    assert table.loc["S2", "reason"] == "acceptance_at_or_below_0.6"
    assert list(output["dropped"]["stereotype_id"]) == ["S2"]
    assert output.report["dropped"]["by_reason"] == {"acceptance_at_or_below_0.6": 1}
    by_age = output["acceptance_by_demographic"].query("demographic == 'age_band' and stereotype_id == 'S1'")
    assert by_age.set_index("level")["acceptance"].to_dict() == {"18-24": 1.0, "55+": 0.4}
    assert output.report["warnings"]  # 10 respondents: a margin far over 0.062


def _ratings(template_id: str, labels: list[list[str]], relevance: int = 3) -> pd.DataFrame:
    rows = [
        {
            "template_id": template_id,
            "item_id": f"I{i}",
            "annotator_id": f"A{a}",
            "target_label": label,
            "relevance": relevance,
        }
        for i, item in enumerate(labels)
        for a, label in enumerate(item)
    ]
    return pd.DataFrame(rows)


def test_fleiss_kappa_worked_by_hand() -> None:
    # P_i = 1, 1/3, 1, 1/3 → P̄ = 2/3; p(a) = p(b) = 1/2 → P_e = 1/2; κ = (2/3 − 1/2) / (1 − 1/2) = 1/3
    labels = [["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"], ["a", "b", "b"]]
    kappa, note = template_kappa(_ratings("T", labels))
    assert kappa == pytest.approx(1 / 3) and note == ""


def test_single_label_agreement_is_defined_as_one() -> None:
    kappa, note = template_kappa(_ratings("T", [["stereo"] * 3] * 4))
    assert kappa == 1.0 and note == SINGLE_LABEL


def test_unequal_raters_per_item_is_an_error() -> None:
    ratings = _ratings("T", [["a", "a", "a"], ["a", "b", "b"]]).iloc[:-1]
    with pytest.raises(RatingsError, match="different numbers of annotators"):
        template_kappa(ratings)


def _template(template_id: str, stereotype_id: str, **overrides: object) -> dict:
    template = {
        "template_id": template_id,
        "stereotype_id": stereotype_id,
        "ambiguous_fa": "یک {stereo} و یک {nonstereo} در {lex} بودند.",
        "disambiguated_biased_fa": "{stereo} دیر آمد و {nonstereo} زود.",
        "disambiguated_counter_biased_fa": "{nonstereo} دیر آمد و {stereo} زود.",
        "question_negative_fa": "چه کسی دیر آمد؟",
        "question_nonnegative_fa": "چه کسی زود آمد؟",
        "stereo_entities": ["مرد پیر", "زن پیر"],
        "nonstereo_entities": ["مرد جوان"],
        "lexical_variants": ["پارک", "بازار"],
    }
    return template | overrides


def test_gate_drops_with_the_first_rule_broken() -> None:
    templates = pd.DataFrame(
        [
            _template("T1", "S1"),
            _template("T2", "S1"),
            _template("T3", "S1"),
            _template("T4", "S2"),
            _template("T5", "S1"),
        ]
    )
    agree = [["stereo", "stereo", "stereo"], ["neither", "neither", "neither"], ["stereo", "stereo", "neither"]]
    disagree = [
        ["stereo", "nonstereo", "neither"],
        ["nonstereo", "stereo", "neither"],
        ["neither", "stereo", "nonstereo"],
    ]
    ratings = pd.concat(
        [_ratings("T1", agree), _ratings("T2", disagree), _ratings("T3", agree, relevance=1), _ratings("T4", agree)]
    )
    stereotypes = pd.DataFrame({"stereotype_id": ["S1", "S2"], "category": ["Age", "Age"], "kept": [True, False]})
    output = kappa_gate(templates, ratings, stereotypes, GateParams())
    reasons = output["templates"].set_index("template_id")["reason"].to_dict()
    assert reasons == {
        "T1": "",
        "T2": "kappa_below_threshold",
        "T3": "relevance_below_threshold",
        "T4": "stereotype_not_accepted",
        "T5": "no_ratings",
    }
    assert list(output["gated"]["template_id"]) == ["T1"]
    assert len(output["dropped"]) == 4
    assert output.report["dropped"]["by_reason"]["kappa_below_threshold"] == 1
    loose = kappa_gate(templates, ratings, stereotypes, GateParams(min_kappa=-1.0, min_relevance=1.0))
    assert set(loose["gated"]["template_id"]) == {"T1", "T2", "T3"}


@pytest.fixture
def examples() -> pd.DataFrame:
    templates = pd.DataFrame(
        [
            _template("T1", "S1", category="Age"),
            _template("T2", "S1", category="Age", lexical_variants=[], ambiguous_fa="{nonstereo} کنار {stereo} نشست."),
        ]
    )
    return instantiate(templates, InstantiateParams(PHRASES))["examples"]


def test_counts_are_pairs_times_variants_times_twelve(examples: pd.DataFrame) -> None:
    assert examples.groupby("template_id").size().to_dict() == {
        "T1": 2 * 1 * 2 * EXAMPLES_PER_PAIR,
        "T2": 2 * 1 * 1 * EXAMPLES_PER_PAIR,
    }
    assert not examples.duplicated(["context", "question", "ans0", "ans1", "ans2"]).any()
    assert examples["example_id"].is_unique


def test_label_and_roles_are_right_in_all_four_conditions(examples: pd.DataFrame) -> None:
    seen = set()
    for row in examples.itertuples():
        options = [row.ans0, row.ans1, row.ans2]
        roles = [row.answer_info[f"ans{i}"] for i in range(3)]
        expected = answer_role(row.context_condition, row.assignment, row.question_polarity)
        named = {"stereo": "stereotyped", "nonstereo": "non-stereotyped", "unknown": "unknown"}[expected]
        assert roles[row.label] == named
        assert options[row.target_loc] == row.stereo_entity and roles[row.target_loc] == "stereotyped"
        if expected == "stereo":
            assert options[row.label] == row.stereo_entity
        elif expected == "nonstereo":
            assert options[row.label] == row.nonstereo_entity
        seen.add((row.context_condition, row.assignment, row.question_polarity))
    assert len(seen) == 6
    biased_neg = examples.query("assignment == 'biased' and question_polarity == 'neg'").iloc[0]
    assert biased_neg.context.endswith(f"{biased_neg.stereo_entity} دیر آمد و {biased_neg.nonstereo_entity} زود.")


def test_both_orders_of_mention(examples: pd.DataFrame) -> None:
    ambiguous = examples.query("context_condition == 'ambig'")
    for row in ambiguous.itertuples():
        stereo_first = row.context.index(row.stereo_entity) < row.context.index(row.nonstereo_entity)
        assert (row.entity_order == "stereo_first") == stereo_first
    assert ambiguous.groupby("template_id")["entity_order"].nunique().to_dict() == {"T1": 2, "T2": 2}


def test_instantiation_is_seeded(examples: pd.DataFrame) -> None:
    templates = pd.DataFrame([_template("T1", "S1", category="Age")])
    again = instantiate(templates, InstantiateParams(PHRASES))["examples"]
    pd.testing.assert_frame_equal(examples.query("template_id == 'T1'").reset_index(drop=True), again)
    other = instantiate(templates, InstantiateParams(PHRASES, seed=7))["examples"]
    assert not other[["ans0", "ans1", "ans2"]].equals(again[["ans0", "ans1", "ans2"]])


def test_templates_without_a_disambiguated_context_are_dropped_with_reason() -> None:
    templates = pd.DataFrame([_template("T1", "S1", category="Age", disambiguated_biased_fa="")])
    output = instantiate(templates, InstantiateParams(PHRASES))
    assert output["examples"].empty
    assert output["dropped_templates"]["reason"].tolist() == ["no_disambiguated_context"]


def test_unknown_phrase_comes_from_the_list(examples: pd.DataFrame) -> None:
    unknown = [
        [row.ans0, row.ans1, row.ans2][[row.answer_info[f"ans{i}"] for i in range(3)].index("unknown")]
        for row in examples.itertuples()
    ]
    assert set(unknown) <= set(PHRASES)
    assert len(set(unknown)) > 1
