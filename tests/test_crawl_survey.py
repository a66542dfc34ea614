"""From the experts' reviewed sheet to the questionnaire and the form, and from a form tool's export back to
``responses.csv``."""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from pbbq.flows.cli import main
from pbbq.tasks.core.artifacts import REPO_ROOT
from pbbq.tasks.core.inputs import DEMOGRAPHIC_COLUMNS, InputError, load_questionnaire, load_responses
from pbbq.tasks.crawl.candidates import REVIEW_COLUMNS, people_csv
from pbbq.tasks.crawl.survey_form import (
    DEMOGRAPHIC_QUESTIONS,
    WRITE_IN,
    WRITE_IN_TITLE,
    form_table,
    kept_rows,
    questionnaire_update,
    read_form_exports,
)

SURVEY = REPO_ROOT / "survey"


def _sheet(path: Path, rows: list[dict[str, str]]) -> Path:
    """A reviewed sheet as a spreadsheet tool keeps it: the crawl's layout, BOM, neutralised cells."""
    frame = pd.DataFrame([{column: row.get(column, "") for column in REVIEW_COLUMNS} for row in rows])
    path.write_bytes(people_csv(frame))
    return path


TURKS = {
    "cluster_id": "CL-1",
    "category": "Ethnicity",
    "group": "ترک‌ها",
    "decision": "keep",
    "statement_fa": "ترک‌ها لجبازند.",
    "statement_en": "- Turks are stubborn.",
    "target_group": "ترک‌ها",
    "non_target_groups": "فارس‌ها; کردها",
}
ISFAHANIS = {
    "cluster_id": "CL-2",
    "category": "Domestic Area",
    "decision": "Keep",
    "statement_fa": "اصفهانی‌ها خسیس‌اند.",
    "target_group": "اصفهانی‌ها",
    "non_target_groups": "شیرازی‌ها",
}


@pytest.fixture
def questionnaire(tmp_path: Path) -> Path:
    return Path(shutil.copy(SURVEY / "questionnaire.csv", tmp_path / "questionnaire.csv"))


def test_kept_rows_get_new_ids_and_the_old_rows_stay_as_they_are(tmp_path: Path, questionnaire: Path) -> None:
    before = questionnaire.read_bytes()
    existing = load_questionnaire(questionnaire).set_index("stereotype_id")
    known = {**TURKS, "cluster_id": "CL-3", "statement_fa": existing.at["ETH-01", "statement_fa"]}
    rows = [TURKS, {"cluster_id": "CL-9", "decision": "drop"}, ISFAHANIS, {"cluster_id": "CL-8"}, known]
    sheet = kept_rows(_sheet(tmp_path / "review.csv", rows))
    assert sheet.decisions == {"keep": 3, "drop": 1, "undecided": 1}
    update = questionnaire_update(questionnaire, sheet)
    assert list(update.added["stereotype_id"]) == ["ETH-04", "DOM-04"]
    assert update.already == [{"row": 6, "cluster_id": "CL-3", "stereotype_id": "ETH-01"}]
    assert questionnaire.read_bytes() == before  # checked, not written yet
    update.write()
    assert questionnaire.read_bytes().startswith(before)
    table = load_questionnaire(questionnaire).set_index("stereotype_id")
    assert table.at["ETH-04", "statement_en"] == "- Turks are stubborn."  # the sheet's "'-" undone
    assert table.at["ETH-04", "non_target_groups"] == ["فارس‌ها", "کردها"]
    assert table.at["DOM-04", "source"] == "crawl" and len(table) == 50
    again = questionnaire_update(questionnaire, sheet)  # the same sheet twice adds nothing
    assert again.added.empty and len(again.already) == 3
    more = {**TURKS, "cluster_id": "CL-5", "statement_fa": "ترک‌ها زودجوش‌اند."}
    later = questionnaire_update(questionnaire, kept_rows(_sheet(tmp_path / "later.csv", [more])))
    assert list(later.added["stereotype_id"]) == ["ETH-05"]
    assert list(load_questionnaire(questionnaire)["stereotype_id"])[:48] == list(existing.index)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({**TURKS, "decision": "maybe"}, "row 2: decision 'maybe' is not keep, drop or empty"),
        ({**TURKS, "target_group": ""}, "row 2: kept row has an empty target_group"),
        ({**TURKS, "category": "Cities"}, "row 2: category 'Cities' is not one of the 16"),
    ],
)
def test_a_bad_reviewed_row_is_named(tmp_path: Path, row: dict[str, str], problem: str) -> None:
    path = _sheet(tmp_path / "review.csv", [row])
    with pytest.raises(InputError, match=re.escape(f"{path}, {problem}")):
        kept_rows(path)


def test_the_form_has_appendix_e_then_every_statement_in_a_seeded_order_per_version() -> None:
    table = load_questionnaire(SURVEY / "questionnaire.csv")
    one, two = form_table(table, 1, seed=42), form_table(table, 2, seed=42)
    assert list(one["question_id"][:7]) == list(DEMOGRAPHIC_COLUMNS)
    assert one.at[0, "options"] == "مرد;زن" and one.iloc[-1]["question_id"] == WRITE_IN
    statements = one[one["options"] == "بله;خیر"]
    assert sorted(statements["question_id"]) == sorted(table["stereotype_id"])
    assert list(statements["question_id"]) != list(two[two["options"] == "بله;خیر"]["question_id"])
    assert form_table(table, 1, seed=42).equals(one) and not form_table(table, 1, seed=7).equals(one)
    assert list(one["position"]) == list(range(1, 57))


def _export(path: Path, form: pd.DataFrame, responses: pd.DataFrame, english: bool = False) -> Path:
    """A Google Forms response export of ``form``: a timestamp, then one column per question by its title."""
    labels = {
        column: {value: label for label, value in options.items()}
        for column, (_, options) in DEMOGRAPHIC_QUESTIONS.items()
    }
    yes_no = {"yes": "Yes", "no": "No", "": ""} if english else {"yes": "بله", "no": "خیر", "": ""}
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["Timestamp", *form["title"]])
    for number, (_, respondent) in enumerate(responses.iterrows()):
        cells = []
        for question in form["question_id"]:
            if question in labels:
                cells.append(labels[question][respondent[question]])
            elif question == WRITE_IN:
                cells.append("یکی گفت ترک‌ها خسیس‌اند؛ شماره‌ام ۰۹۱۲۱۱۱۲۲۳۳ است" if number == 3 else "")
            else:
                cells.append(yes_no[respondent[question]])
        writer.writerow([f"2024/03/{1 + number % 28:02d} 10:00:00 GMT+3:30", *cells])
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def test_the_form_export_round_trips_to_the_same_responses_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = load_questionnaire(SURVEY / "questionnaire.csv")
    original = load_responses(SURVEY / "responses.csv", table["stereotype_id"])
    first = _export(tmp_path / "v1.csv", form_table(table, 1, 42), original.iloc[:125])
    second = _export(tmp_path / "v2.csv", form_table(table, 2, 42), original.iloc[125:], english=True)
    out = tmp_path / "responses.csv"
    code = main(["responses", "--export", str(first), str(second), "--out", str(out)])
    assert code == 0
    assert load_responses(out, table["stereotype_id"]).equals(original)
    write_ins = pd.read_csv(tmp_path / "write_ins.csv", dtype=str)
    assert write_ins.to_dict("records") == [
        {"respondent_id": "R004", "text": "یکی گفت ترک‌ها خسیس‌اند؛ شماره‌ام [PHONE] است"},
        {"respondent_id": "R129", "text": "یکی گفت ترک‌ها خسیس‌اند؛ شماره‌ام [PHONE] است"},
    ]
    assert "250 respondents" in capsys.readouterr().out


def test_duplicates_and_missing_answers_are_reported_never_guessed(tmp_path: Path) -> None:
    table = load_questionnaire(SURVEY / "questionnaire.csv")
    original = load_responses(SURVEY / "responses.csv", table["stereotype_id"])
    form = form_table(table, 1, 42)
    form = form[form["question_id"] != "SEX-03"]  # a question this form did not ask
    rows = original.iloc[[0, 1, 0]].copy()
    rows.iloc[1, rows.columns.get_loc("AGE-01")] = ""
    imported = read_form_exports([_export(tmp_path / "v1.csv", form, rows)], table)
    assert list(imported.responses["respondent_id"]) == ["R001", "R002"]
    assert imported.report["duplicates"] == [{"submission": "v1.csv row 4", "same_as": "v1.csv row 2"}]
    assert imported.report["missing_answers"]["AGE-01"] == 1 + (original.iloc[[0, 1]]["AGE-01"] == "").sum()
    assert imported.report["not_in_any_export"] == ["SEX-03"]
    assert (imported.responses["SEX-03"] == "").all()


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda text: text.replace("Timestamp,", "Timestamp,Email Address,", 1).replace(
                " GMT+3:30,", " GMT+3:30,a@b.c,"
            ),
            "row 1: unknown column(s) 'Email Address'",
        ),
        (lambda text: text.replace("Timestamp", "When", 1), "row 1: the first column must be the timestamp"),
        (lambda text: re.sub(r",(بله|خیر),", ",شاید,", text, count=1), "row 2: answer 'شاید' to "),
        (lambda text: text.replace(",مرد,", ",آقا,", 1).replace(",زن,", ",آقا,", 1), "answer 'آقا' to gender"),
    ],
)
def test_a_bad_export_stops_with_the_file_row_and_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[str], str], problem: str
) -> None:
    table = load_questionnaire(SURVEY / "questionnaire.csv")
    original = load_responses(SURVEY / "responses.csv", table["stereotype_id"])
    path = _export(tmp_path / "v1.csv", form_table(table, 1, 42), original.iloc[:3])
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(problem)):
        read_form_exports([path], table)
    assert main(["responses", "--export", str(path), "--out", str(tmp_path / "r.csv")]) == 1
    assert capsys.readouterr().err.startswith(f"pbbq: error: {path}, row")
    assert not (tmp_path / "r.csv").exists()


def test_pbbq_questionnaire_adds_and_writes_the_forms(
    tmp_path: Path, questionnaire: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sheet = _sheet(tmp_path / "review.csv", [TURKS, ISFAHANIS])
    args = ["questionnaire", "--reviewed", str(sheet), "--questionnaire", str(questionnaire), "--versions", "3"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "2 new stereotype(s): ETH-04, DOM-04" in printed
    forms = sorted((tmp_path / "forms").glob("*.csv"))
    assert [p.name for p in forms] == ["form-v1.csv", "form-v2.csv", "form-v3.csv"]
    first = pd.read_csv(forms[0], dtype=str, keep_default_na=False, encoding="utf-8-sig")
    assert {"ETH-04", "DOM-04"} <= set(first["question_id"]) and len(first) == 7 + 50 + 1
    assert WRITE_IN_TITLE in set(first["title"])
    data = [p.read_bytes() for p in forms]
    assert main(args) == 0 and [p.read_bytes() for p in forms] == data  # the same seed, the same forms
    assert "0 new stereotype(s)" in capsys.readouterr().out


def _files(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_pbbq_responses_of_a_header_only_export_changes_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export is checked, and the responses it makes, before the survey's responses file is replaced."""
    table = load_questionnaire(SURVEY / "questionnaire.csv")
    export = _export(tmp_path / "v1.csv", form_table(table, 1, 42), table.iloc[:0])
    out = Path(shutil.copy(SURVEY / "responses.csv", tmp_path / "responses.csv"))
    (tmp_path / "write_ins.csv").write_text("respondent_id,text\nR001,earlier\n", encoding="utf-8")
    before = _files(tmp_path)
    assert main(["responses", "--export", str(export), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"pbbq: error: {export}: no submissions: the export has a header only (leave it out of --export)\n"
    assert _files(tmp_path) == before


@pytest.fixture
def survey_folder(tmp_path: Path, questionnaire: Path) -> tuple[list[str], dict[Path, bytes]]:
    """A questionnaire and its forms written by a first ``pbbq questionnaire``; the arguments of a second one."""
    args = ["questionnaire", "--questionnaire", str(questionnaire), "--versions", "2"]
    assert main([*args, "--reviewed", str(_sheet(tmp_path / "first.csv", [TURKS]))]) == 0
    return [*args, "--reviewed", str(_sheet(tmp_path / "review.csv", [ISFAHANIS]))], _files(tmp_path)


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--versions", "0"], "argument --versions: must be at least 1, not 0"),
        (["--seed", "-1"], "argument --seed: must be at least 0, not -1"),
    ],
)
def test_pbbq_questionnaire_refuses_bad_arguments_before_it_writes(
    survey_folder: tuple[list[str], dict[Path, bytes]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    problem: str,
) -> None:
    args, before = survey_folder
    with pytest.raises(SystemExit) as exit_:
        main([*args, *extra])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"pbbq: error: {problem} (see pbbq questionnaire --help)\n"
    assert _files(tmp_path) == before


def test_a_statement_that_would_break_the_form_changes_no_file(
    survey_folder: tuple[list[str], dict[Path, bytes]],
    tmp_path: Path,
    questionnaire: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A kept statement that is the title of a demographic question would make the form's answers ambiguous: the
    new questionnaire is refused, naming it, before it or a form is written."""
    args, before = survey_folder
    title = DEMOGRAPHIC_QUESTIONS["gender"][0]
    sheet = _sheet(tmp_path / "review.csv", [{**ISFAHANIS, "statement_fa": title}])
    before[sheet] = sheet.read_bytes()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pbbq: error: {questionnaire}: stereotype DOM-04: its statement is the title of another")
    assert err.count("\n") == 1 and _files(tmp_path) == before
