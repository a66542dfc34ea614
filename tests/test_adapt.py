"""The adaptation path (PakBBQ §3.1–§3.2): BBQ's template files read row by row, the review sheet and its classes
(DT keeps, TM rewrites, NA adds, SR removes with its reason), and the stage-03 gate on the adapted templates."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pbbq.tasks.adapt import ADAPT, adapt
from pbbq.tasks.adapt.bbq_format import load_bbq_templates, load_bbq_vocabulary
from pbbq.tasks.adapt.sheet import apply_classes, load_reviewed_sheet, review_sheet
from pbbq.tasks.core.artifacts import spreadsheet_safe
from pbbq.tasks.core.inputs import InputError, load_ratings
from pbbq.tasks.core.schemas import to_arrow
from pbbq.tasks.core.stage import finish
from pbbq.tasks.kappa_gate import GateParams
from tests.adapt_support import (
    NA_ROW,
    NATIONALITY,
    RELIGION,
    SAMPLE_RATINGS,
    SAMPLE_SHEET,
    VOCABULARY,
    write_csv,
    write_sheet,
    write_templates,
)


def test_bbq_template_files_are_read_as_its_generator_reads_them() -> None:
    nationality, religion = load_bbq_templates(NATIONALITY), load_bbq_templates(RELIGION)
    assert (len(nationality), len(religion)) == (25, 25)
    assert set(religion["Category"]) == {"Religion"}  # BBQ's file writes "Religion "
    vocabulary = load_bbq_vocabulary(VOCABULARY)
    religions = set(vocabulary.loc[vocabulary["Category"] == "Religion", "Name"])
    assert "Orthodox" not in religions and {"Muslim", "Hindu", "Atheist"} <= religions  # Pilot_include = No


@pytest.mark.parametrize(
    ("row", "extra", "problem"),
    [
        ({"Known_stereotyped_groups": "[British"}, (), "Known_stereotyped_groups '[British': "),
        ({"Answer_non_negative": "The other one"}, (), "must each name one of {{NAME1}}, {{NAME2}}"),
        ({"Answer_non_negative": "The {{NAME1}} person"}, (), "must each name one of {{NAME1}}, {{NAME2}}"),
        ({"Ambiguous_Context": "A {{NAME1}} person sat down."}, (), "must name both {{NAME1}} and {{NAME2}}"),
        ({"Lexical_diversity": ""}, (), "uses {{WORD1}} but Lexical_diversity gives no WORD1 list"),
        ({"Lexical_diversity": "WORD1: cafe, park"}, (), "Lexical_diversity part 'WORD1: cafe, park' is not"),
        ({"Proper_nouns_only": "yes"}, ("Proper_nouns_only",), "Proper_nouns_only 'yes' is not TRUE or FALSE"),
        ({"Names": "NAME2: [a, b]"}, ("Names",), "Names 'NAME2: [a, b]': Names gives no NAME1 list"),
        (
            {"NAME1_info": "Hindu", "NAME2_info": "Sikh"},
            ("NAME1_info", "NAME2_info"),
            "NAME1_info 'Hindu' and NAME2_info 'Sikh': exactly one must be a stereotyped group",
        ),
        ({"Category": "Race_x_SES"}, (), "category 'Race_x_SES' needs the columns of BBQ's second generator"),
        ({"Category": "Race_x_Age"}, (), "category 'Race_x_Age': only Race_ethnicity, Religion, Nationality"),
        ({"Q_id": ""}, (), "empty Q_id"),
    ],
)
def test_a_bad_template_row_is_one_line_naming_file_and_row(
    tmp_path: Path, row: dict[str, str], extra: tuple[str, ...], problem: str
) -> None:
    path = write_templates(tmp_path / "templates-Religion.csv", {}, row, extra=extra)
    with pytest.raises(InputError) as error:
        load_bbq_templates(path)
    assert str(error.value).startswith(f"{path}, row 3: ")
    assert problem in str(error.value) and "\n" not in str(error.value)


def test_a_vocabulary_row_twice_is_named(tmp_path: Path) -> None:
    rows = [{"Category": "Religion", "Name": "Hindu"}] * 2
    path = write_csv(tmp_path / "vocabulary.csv", rows, ["Category", "Pilot_include", "SubCat", "Name", "Info"])
    with pytest.raises(InputError, match=r"vocabulary.csv, row 3: Religion group 'Hindu' appears twice"):
        load_bbq_vocabulary(path)


def _sheet_rows() -> list[dict[str, str]]:
    """The review sheet of BBQ's Religion file as rows."""
    return review_sheet(load_bbq_templates(RELIGION)).to_dict("records")


def test_the_review_sheet_has_one_row_per_template_and_the_columns_to_fill(tmp_path: Path) -> None:
    sheet = review_sheet(pd.concat([load_bbq_templates(NATIONALITY), load_bbq_templates(RELIGION)]))
    assert len(sheet) == 50 and sheet["template_id"].is_unique
    first = sheet.iloc[0]
    assert (first.template_id, first.bbq_stereotyped_groups, first.bbq_answer_negative) == (
        "Nationality-1",
        "British",
        "The {{NAME1}} friend",
    )


def test_the_sheet_is_spreadsheet_safe_and_read_back_as_written(tmp_path: Path) -> None:
    formula = '=HYPERLINK("x") Who lied?'
    row = _sheet_rows()[0] | {"class": "TM", "target_question_negative": formula}
    path = write_sheet(tmp_path / "reviewed.csv", spreadsheet_safe(pd.DataFrame([row])).to_dict("records"))
    assert "'" + formula.replace('"', '""') in path.read_text(encoding="utf-8")
    assert load_reviewed_sheet(path).at[0, "target_question_negative"] == formula


@pytest.mark.parametrize(
    ("cells", "problem"),
    [
        ({"class": "XX"}, "class 'XX' is not one of DT, TM, NA, SR"),
        ({"class": ""}, "1 row(s) not reviewed (no class): Religion-2"),
        ({"class": "SR"}, "SR (simply removed) needs its reason"),
        ({"class": "TM"}, "TM (target modified) changes the groups, the text or both, but no target_ column does"),
        ({"class": "DT", "target_stereotyped_groups": "Sikh"}, "DT keeps BBQ's text and groups but target_stereotyped"),
        ({"class": "DT", "target_other_groups": "Sikh"}, "target_other_groups changes it: class the row TM (TM may"),
        ({"class": "TM", "target_answer_negative": "The person"}, "TM template: the negative and the non-negative"),
    ],
)
def test_a_bad_reviewed_row_is_one_line_naming_file_and_row(
    tmp_path: Path, cells: dict[str, str], problem: str
) -> None:
    rows = [row | {"class": "DT"} for row in _sheet_rows()[:3]]
    rows[1] |= cells
    path = write_sheet(tmp_path / "reviewed.csv", rows)
    with pytest.raises(InputError) as error:
        load_reviewed_sheet(path)
    assert str(error.value).startswith(f"{path}, row 3: ") and problem in str(error.value)


def test_a_newly_added_row_needs_its_own_text_and_groups(tmp_path: Path) -> None:
    added = {
        "template_id": "PK-1",
        "class": "NA",
        "category": "Religion",
        "target_ambiguous": "A {{NAME1}} and a {{NAME2}}.",
    }
    path = write_sheet(tmp_path / "reviewed.csv", [added])
    with pytest.raises(InputError, match=r"row 2: NA \(newly added\) needs target_stereotyped_groups"):
        load_reviewed_sheet(path)


def _reviewed(tmp_path: Path) -> pd.DataFrame:
    """Religion-1 DT, Religion-2 TM (new text and groups), Religion-3 SR, and one NA row."""
    rows = _sheet_rows()[:3]
    rows[0] |= {"class": "dt"}
    rows[1] |= {
        "class": "TM",
        "target_stereotyped_groups": "Ahmadi",
        "target_other_groups": "Sunni;Shia",
        "target_ambiguous": "Airport security stopped a {{NAME1}} person and a {{NAME2}} person with {{WORD1}}.",
    }
    rows[2] |= {"class": "SR", "reason": "fraternities do not exist in Pakistan"}
    rows.append(dict(NA_ROW))
    return load_reviewed_sheet(write_sheet(tmp_path / "reviewed.csv", rows))


def test_classes_keep_rewrite_add_and_remove(tmp_path: Path) -> None:
    sheet = _reviewed(tmp_path)
    built, removed = apply_classes(sheet)
    by_id = built.set_index("template_id")
    bbq = load_bbq_templates(RELIGION)
    dt, tm, na = by_id.loc["Religion-1"], by_id.loc["Religion-2"], by_id.loc["PK-NA-1"]
    assert (dt.ambiguous, list(dt.stereotyped_groups), dt.restricted) == (
        bbq.at[0, "Ambiguous_Context"],
        ["Muslim"],
        True,
    )
    assert (
        tm.ambiguous.startswith("Airport security stopped") and tm.disambiguating == bbq.at[1, "Disambiguating_Context"]
    )
    assert (list(tm.stereotyped_groups), list(tm.other_groups), tm.restricted) == (["Ahmadi"], ["Sunni", "Shia"], False)
    assert (na["class"], list(na.stereotyped_groups), na.question_index) == ("NA", ["Christian"], "PK-NA-1")
    assert list(removed["template_id"]) == ["Religion-3"]
    assert removed.at[0, "removal_reason"] == "fraternities do not exist in Pakistan"


def _ratings(template_ids: list[str], disagree: set[str] = frozenset()) -> pd.DataFrame:
    """Three annotators, four items per template: agreeing and relevant, or (``disagree``) kappa < 0.2."""
    agreeing, disagreeing = ["SSS", "SSS", "NNN", "SSN"], ["SSN", "SNO", "NSO", "SON"]
    label = {"S": "stereo", "O": "nonstereo", "N": "neither"}
    rows = [
        {
            "template_id": t,
            "item_id": f"{t}-I{i}",
            "annotator_id": a,
            "target_label": label[labels[i][k]],
            "relevance": 3,
        }
        for t in template_ids
        for labels in [disagreeing if t in disagree else agreeing]
        for i in range(4)
        for k, a in enumerate(("A1", "A2", "A3"))
    ]
    return pd.DataFrame(rows)


def test_sr_is_dropped_with_its_reason_and_na_is_gated_like_the_rest(tmp_path: Path) -> None:
    sheet = _reviewed(tmp_path)
    ratings = _ratings(["Religion-1", "Religion-2", "PK-NA-1"], disagree={"PK-NA-1"})
    output = finish(ADAPT, adapt(sheet, ratings, GateParams()), GateParams())
    for name, table in output.tables.items():
        to_arrow(table, output.schemas[name], name)
    dropped = output["dropped"].set_index("template_id")
    assert dict(dropped["reason"]) == {"PK-NA-1": "kappa_below_threshold", "Religion-3": "simply_removed"}
    assert dropped.at["Religion-3", "removal_reason"] == "fraternities do not exist in Pakistan"
    assert list(output["gated"]["template_id"]) == ["Religion-1", "Religion-2"]
    assert output.report["classes"] == {"DT": 1, "TM": 1, "NA": 1, "SR": 1}
    assert ADAPT.funnel_counts(output) == {
        "adapt_reviewed": 4, "adapt_DT": 1, "adapt_TM": 1, "adapt_NA": 1, "adapt_SR": 1, "adapt_gated": 2,
    }  # fmt: skip


def test_the_gate_is_stage_03s_rule_with_its_thresholds(tmp_path: Path) -> None:
    sheet = _reviewed(tmp_path)
    ratings = _ratings(["Religion-1", "PK-NA-1"], disagree={"PK-NA-1"})
    lenient = adapt(sheet, ratings, GateParams(min_kappa=-1.0))["templates"].set_index("template_id")
    assert lenient.at["PK-NA-1", "kept"] and lenient.at["Religion-2", "reason"] == "no_ratings"
    strict = adapt(sheet, ratings, GateParams(min_relevance=3.01))["templates"].set_index("template_id")
    assert strict.at["Religion-1", "reason"] == "relevance_below_threshold"


def test_the_sample_sheet_classes_templates_for_pakistan() -> None:
    sheet = load_reviewed_sheet(SAMPLE_SHEET)
    output = adapt(sheet, load_ratings(SAMPLE_RATINGS, sheet["template_id"]), GateParams())
    assert output.report["classes"] == {"DT": 3, "TM": 4, "NA": 3, "SR": 4}
    reasons = output["dropped"].set_index("template_id")["reason"].to_dict()
    assert reasons["PK-NA-3"] == "kappa_below_threshold" and reasons["Nationality-1"] == "relevance_below_threshold"
    assert (output["dropped"].loc[output["dropped"]["class"] == "SR", "removal_reason"] != "").all()
    assert set(sheet["category"]) == {"Nationality", "Religion", "Race_ethnicity"}
