"""The review sheet is strict at load (issue 35 items 4-6 and 9, issue 36 item 6): a value that is not what it
seems, an unusable id or group, an unknown column or category and a placeholder typo are one line naming the file,
the row (and the column); TM may change the groups, the text or both, and a row that changes nothing is DT."""

from __future__ import annotations

from pathlib import Path

import pytest

from pbbq.tasks.adapt.bbq_format import load_bbq_templates
from pbbq.tasks.adapt.sheet import SHEET_COLUMNS, apply_classes, load_reviewed_sheet, review_sheet
from pbbq.tasks.core.inputs import InputError
from tests.adapt_support import NA_ROW, RELIGION, write_csv, write_sheet


def _rows() -> list[dict[str, str]]:
    """BBQ's first three Religion templates, classed DT."""
    return [row | {"class": "DT"} for row in review_sheet(load_bbq_templates(RELIGION)).to_dict("records")[:3]]


def _refused(path: Path, row: int, *parts: str) -> str:
    with pytest.raises(InputError) as error:
        load_reviewed_sheet(path)
    message = str(error.value)
    assert message.startswith(f"{path}, row {row}: ") and "\n" not in message, message
    for part in parts:
        assert part in message, message
    return message


@pytest.mark.parametrize("value", ["True", "true", "YES", "yes", "TRUE"])
def test_proper_nouns_only_reads_true_in_any_case(tmp_path: Path, value: str) -> None:
    rows = _rows()
    rows[0]["bbq_proper_nouns_only"] = value
    built, _ = apply_classes(load_reviewed_sheet(write_sheet(tmp_path / "s.csv", rows)))
    assert built["proper_nouns_only"].tolist() == [True, False, False]


@pytest.mark.parametrize("value", ["Tru", "1", "y", "FALSE!"])
def test_proper_nouns_only_of_another_value_is_refused(tmp_path: Path, value: str) -> None:
    rows = _rows()
    rows[1]["bbq_proper_nouns_only"] = value
    _refused(write_sheet(tmp_path / "s.csv", rows), 3, f"bbq_proper_nouns_only {value!r} is not true/false/yes/no")


@pytest.mark.parametrize(
    ("template_id", "problem"),
    [
        ("Religion\n2", "holds the control or bidi character U+000A"),
        ("Religion-\u202e2", "holds the control or bidi character U+202E"),
        ("Religion-\u200f2", "holds the control or bidi character U+200F"),
        ("R" * 5000, "template_id of 5000 characters (at most 100)"),
        ("Religion-{x}", "holds placeholder syntax"),
        ("{{NAME2}}", "holds placeholder syntax"),
        ("Religion-[[x]]", "holds placeholder syntax"),
        ("Religion 2", "holds a space"),
    ],
)
def test_an_unusable_template_id_is_refused(tmp_path: Path, template_id: str, problem: str) -> None:
    rows = _rows()
    rows[1]["template_id"] = template_id
    _refused(write_sheet(tmp_path / "s.csv", rows), 3, problem)


def test_template_ids_differing_only_in_case_are_one_id(tmp_path: Path) -> None:
    rows = _rows()
    rows[2]["template_id"] = rows[0]["template_id"].upper()
    _refused(write_sheet(tmp_path / "s.csv", rows), 4, "'RELIGION-1' appears twice (as 'Religion-1'")


@pytest.mark.parametrize(
    ("column", "groups", "problem"),
    [
        ("target_stereotyped_groups", "{{NAME2}}", "target_stereotyped_groups: group '{{NAME2}}' holds placeholder"),
        ("target_stereotyped_groups", "{x}", "group '{x}' holds placeholder syntax"),
        ("target_other_groups", "Sikh;[[x]]", "target_other_groups: group '[[x]]' holds placeholder syntax"),
        ("target_other_groups", "Sikh;Hin\u202edu", "holds the control or bidi character U+202E"),
        ("target_other_groups", "Sikh;sikh", "group 'sikh' is also 'Sikh'"),
        ("target_other_groups", "Sikh;" + "x" * 300, "group of 300 characters"),
    ],
)
def test_an_unusable_group_is_refused(tmp_path: Path, column: str, groups: str, problem: str) -> None:
    rows = _rows()
    rows[1] |= {"class": "TM", column: groups}
    _refused(write_sheet(tmp_path / "s.csv", rows), 3, problem)


def test_a_group_both_stereotyped_and_compared_is_refused(tmp_path: Path) -> None:
    rows = _rows()
    rows[1] |= {"class": "TM", "target_stereotyped_groups": "Ahmadi", "target_other_groups": "Sikh;ahmadi"}
    _refused(write_sheet(tmp_path / "s.csv", rows), 3, "group 'ahmadi' is also 'Ahmadi'")


def test_an_unknown_column_is_named(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "s.csv", _rows(), [*SHEET_COLUMNS, "notes", "target_ambigous"])
    _refused(path, 1, "unknown column(s) 'notes', 'target_ambigous'")


def test_a_category_the_generator_does_not_build_is_named(tmp_path: Path) -> None:
    path = write_sheet(tmp_path / "s.csv", [*_rows(), NA_ROW | {"category": "Caste"}])
    _refused(path, 5, "category 'Caste' is not one BBQ's generator builds (Race_ethnicity, Religion")


@pytest.mark.parametrize(
    ("column", "text", "problem"),
    [
        ("target_disambiguating", "The {{NAM1}} man cleans; the {{NAME2}} counts.", "unknown placeholder {{NAM1}}"),
        ("target_disambiguating", "The {{NAME3}} man cleans; the {{NAME2}} counts.", "unknown placeholder {{NAME3}}"),
        ("target_disambiguating", "The {{name1}} man cleans; the {{NAME2}} counts.", "unknown placeholder {{name1}}"),
        ("target_question_negative", "Who is the {NAME1}?", "target_question_negative: '{' outside a placeholder"),
        ("target_answer_negative", "The {{NAME1}} {lex}", "target_answer_negative: '{' outside a placeholder"),
        ("target_answer_non_negative", "The {{NAME2}} [[x]]", "target_answer_non_negative: '[[' outside a"),
        ("target_lexical_diversity", "WORD1: [cafe, {x}]", "target_lexical_diversity: word '{x}' holds placeholder"),
    ],
)
def test_a_placeholder_typo_is_named_with_its_row_and_column(
    tmp_path: Path, column: str, text: str, problem: str
) -> None:
    path = write_sheet(tmp_path / "s.csv", [*_rows(), NA_ROW | {column: text}])
    message = _refused(path, 5, "NA template: ", problem)
    assert column in message


def test_rows_without_a_class_are_refused_with_their_ids(tmp_path: Path) -> None:
    rows = _rows()
    rows[0]["class"] = rows[2]["class"] = ""
    _refused(write_sheet(tmp_path / "s.csv", rows), 2, "2 row(s) not reviewed (no class): Religion-1, Religion-3")


def test_tm_may_change_the_groups_alone(tmp_path: Path) -> None:
    rows = _rows()
    rows[1] |= {"class": "TM", "target_other_groups": "Sikh;Christian"}
    built, _ = apply_classes(load_reviewed_sheet(write_sheet(tmp_path / "s.csv", rows)))
    tm = built.set_index("template_id").loc["Religion-2"]
    assert (tm["class"], list(tm.other_groups), tm.ambiguous) == ("TM", ["Sikh", "Christian"], rows[1]["bbq_ambiguous"])


def test_a_row_that_changes_nothing_is_dt(tmp_path: Path) -> None:
    rows = _rows()
    rows[1] |= {"class": "TM", "target_ambiguous": rows[1]["bbq_ambiguous"]}
    _refused(write_sheet(tmp_path / "s.csv", rows), 3, "no target_ column does: class it DT")
    rows[1]["class"] = "DT"  # BBQ's own text copied into its target_ column changes nothing: DT
    assert load_reviewed_sheet(write_sheet(tmp_path / "s.csv", rows)).at[1, "class"] == "DT"
