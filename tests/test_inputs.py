"""Every loader validates: one clear error naming the file, the row and the problem (DESIGN.md §7).

Each case breaks one cell of a copy of the bundled sample and checks the message, then that
``pbbq build`` with that input fails with it and a non-zero exit code, before any stage runs.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

from flows.cli import main
from flows.config import load_config
from tasks.inputs import InputError, load_inputs


def _edit(path: Path, change: Callable[[list[dict[str, str]]], None]) -> None:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows, columns = list(reader), list(reader.fieldnames or [])
    change(rows)
    columns += [c for c in rows[0] if c not in columns]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _set(row: int, column: str, value: str) -> Callable[[list[dict[str, str]]], None]:
    """Set a cell; ``row`` is the spreadsheet row (header = 1)."""

    def change(rows: list[dict[str, str]]) -> None:
        rows[row - 2][column] = value

    return change


def _duplicate_respondent(rows: list[dict[str, str]]) -> None:
    rows[9]["respondent_id"] = rows[2]["respondent_id"]


def _extra_answer_column(rows: list[dict[str, str]]) -> None:
    for row in rows:
        row["XYZ-99"] = "yes"


CASES = {
    "unknown stereotype id in templates": (
        "annotations/templates.csv",
        _set(5, "stereotype_id", "AGE-99"),
        "templates.csv, row 5: unknown stereotype id 'AGE-99'",
    ),
    "unknown stereotype id in responses": (
        "survey/responses.csv",
        _extra_answer_column,
        "responses.csv, row 1: unknown stereotype id(s) XYZ-99",
    ),
    "missing placeholder": (
        "annotations/templates.csv",
        _set(3, "ambiguous_fa", "یک مرد و یک {nonstereo} در صف {lex} بودند."),
        "templates.csv, row 3: ambiguous_fa is missing placeholder(s) {stereo}",
    ),
    "extra placeholder": (
        "annotations/templates.csv",
        _set(4, "question_negative_fa", "کدام {stereo} دیر آمد؟"),
        "templates.csv, row 4: question_negative_fa has placeholder(s) {stereo} it may not have",
    ),
    "answer outside the allowed set": (
        "survey/responses.csv",
        _set(7, "AGE-01", "maybe"),
        "responses.csv, row 7: answer 'maybe' for AGE-01",
    ),
    "duplicate respondent": (
        "survey/responses.csv",
        _duplicate_respondent,
        "responses.csv, row 11: duplicate respondent",
    ),
    "rating outside 1-3": (
        "annotations/ratings.csv",
        _set(6, "relevance", "5"),
        "ratings.csv, row 6: relevance '5' is outside the scale 1–3",
    ),
    "empty entity list": (
        "annotations/templates.csv",
        _set(8, "nonstereo_entities", ""),
        "templates.csv, row 8: empty entity list nonstereo_entities",
    ),
    "unknown category": (
        "survey/questionnaire.csv",
        _set(2, "category", "Astrology"),
        "questionnaire.csv, row 2: category 'Astrology' is not one of the 16",
    ),
    "unknown template in ratings": (
        "annotations/ratings.csv",
        _set(2, "template_id", "NOPE-T1"),
        "ratings.csv, row 2: unknown template id 'NOPE-T1'",
    ),
    "override for an unknown assignment": (
        "annotations/disambiguation_overrides.csv",
        _set(2, "assignment", "both"),
        "disambiguation_overrides.csv, row 2: assignment 'both'",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_cell_is_named_by_file_row_and_problem(sample_copy: Path, case: str) -> None:
    relative, change, message = CASES[case]
    _edit(sample_copy / relative, change)
    with pytest.raises(InputError) as error:
        load_inputs(load_config(sample_copy / "configs" / "sample.toml").inputs)
    assert message in str(error.value)
    assert str(sample_copy / relative) in str(error.value)


def test_the_bundled_sample_is_valid(sample_copy: Path) -> None:
    tables = load_inputs(load_config(sample_copy / "configs" / "sample.toml").inputs)
    assert len(tables["questionnaire"]) >= 40 and len(tables["responses"]) == 250
    assert len(tables["templates"]) >= 32 and tables["ratings"]["annotator_id"].nunique() >= 3


def test_the_build_command_fails_with_the_message(
    prefect_server: None, sample_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    relative, change, message = CASES["duplicate respondent"]
    _edit(sample_copy / relative, change)
    config = sample_copy / "configs" / "sample.toml"
    assert main(["build", "--config", str(config), "--outputs", str(tmp_path / "out")]) == 1
    assert message in capsys.readouterr().err
