"""From the experts' reviewed sheet to the survey and back (PBBQ §3.2, Appendix E).

- :func:`kept_rows` and :func:`questionnaire_update`: the rows the experts kept become stereotypes of
  ``survey/questionnaire.csv`` with ids that continue each category's numbering (``ETH-04`` after ``ETH-03``).
  Rows already in the file stay byte for byte as they are and are never renumbered; a kept statement the file
  already holds is reported, not added twice.
- :func:`form_table` and :func:`form_files`: the respondent-facing form, one CSV per form version that a form
  tool can import: the Appendix E demographic questions, then one yes/no statement per stereotype in an order
  shuffled with the seed and the version, then the optional write-in question ('report other stereotypes you
  have heard', §3.2).
- :func:`read_form_exports`: a form tool's response export (Google Forms' CSV: a timestamp column, then one column
  per question titled by its text) back to ``survey/responses.csv``: titles mapped to stereotype ids and
  demographic columns, Persian or English yes/no to ``yes``/``no``. An unknown column or answer stops with the
  file, the row and the problem; duplicate submissions and missing answers are reported, never guessed.
  Write-ins are scrubbed of personal data like crawled posts.

Nothing here writes an input file as it goes: the questionnaire and the forms come back as bytes, checked, and
a command writes them only when all are known to be good (each through a temporary file and a rename), so a
failure changes no file.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.artifacts import atomic_write_bytes
from ..core.inputs import (
    DEMOGRAPHIC_COLUMNS,
    QUESTIONNAIRE_COLUMNS,
    InputError,
    load_questionnaire,
    spreadsheet_row,
)
from ..text.categories import CATEGORIES, SURVEY_CODES, not_one_of
from ..text.languages.fa import normalize_fa
from .candidates import REVIEW_COLUMNS, people_csv, restore_cell
from .scrub import scrub_segments

DECISIONS = ("keep", "drop")

_NOT_SAYING = "ترجیح می‌دهم نگویم"
DEMOGRAPHIC_QUESTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "gender": ("جنسیت شما", {"مرد": "male", "زن": "female"}),
    "age_band": (
        "گروه سنی شما",
        {"18-24": "18-24", "25-34": "25-34", "35-44": "35-44", "45-54": "45-54", "55+": "55+"},
    ),
    "income_band": (
        "درآمد ماهانه‌ی شما (میلیون ریال)",
        {
            "کمتر از 100": "<100",
            "100 تا 200": "100-200",
            "200 تا 310": "200-310",
            "310 تا 510": "310-510",
            "510 تا 750": "510-750",
            "بیشتر از 750": "750+",
            _NOT_SAYING: "prefer_not_to_say",
        },
    ),
    "education": (
        "تحصیلات شما",
        {
            "زیر دیپلم": "less_than_high_school",
            "دیپلم": "diploma",
            "کارشناسی": "bachelor",
            "کارشناسی ارشد": "master",
            "دکتری": "phd",
            "فوق دکتری": "post_phd",
        },
    ),
    "sexual_orientation": (
        "گرایش جنسی شما",
        {"همجنس‌گرا": "homosexual", "دگرجنس‌گرا": "heterosexual", _NOT_SAYING: "prefer_not_to_say"},
    ),
    "religion": (
        "دین شما",
        {
            "اسلام": "islam",
            "مسیحیت": "christianity",
            "زرتشتی": "zoroastrianism",
            "یهودیت": "judaism",
            "سایر": "other",
            "بدون دین": "none",
            _NOT_SAYING: "prefer_not_to_say",
        },
    ),
    "political_orientation": (
        "گرایش سیاسی شما",
        {
            "اصلاح‌طلب": "reformist",
            "اصول‌گرا": "conservative",
            "سلطنت‌طلب": "monarchist",
            "کمونیست": "communist",
            "لیبرال": "liberal",
            "جمهوری‌خواه": "republican",
            "سایر": "other",
        },
    ),
}
"""The Appendix E questions: the column of responses.csv, the Persian title and the options (label → value)."""
assert tuple(DEMOGRAPHIC_QUESTIONS) == DEMOGRAPHIC_COLUMNS
YES_NO = {"بله": "yes", "خیر": "no"}
ANSWER_SPELLINGS = {**YES_NO, "بلی": "yes", "آره": "yes", "نه": "no", "yes": "yes", "no": "no"}
STATEMENT_HELP = "آیا این کلیشه را شنیده‌اید یا به آن باور دارید؟"
WRITE_IN = "write_in"
WRITE_IN_TITLE = "اگر کلیشه‌ی دیگری درباره‌ی گروهی در جامعه‌ی ایران شنیده‌اید، بنویسید (اختیاری)"
TIMESTAMP_COLUMNS = ("Timestamp", "زمان", "برچسب زمان", "برچسب زمانی", "مهر زمانی")
FORM_COLUMNS = ["form_version", "position", "question_id", "type", "title", "help", "options", "required"]


# --- the reviewed sheet into the questionnaire ---------------------------------------------------------------


@dataclass
class ReviewedSheet:
    kept: pd.DataFrame
    """The kept rows: ``row`` (spreadsheet row), ``cluster_id`` and the questionnaire's columns but the id."""
    decisions: dict[str, int]
    """Rows per decision (``keep``, ``drop``, ``undecided``)."""


def _read_sheet(path: Path) -> pd.DataFrame:
    """A spreadsheet's CSV export as strings, cells as they are; an :class:`InputError` if it is missing or
    unreadable."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(path, None, f"not a readable UTF-8 CSV file ({exc})") from None


def kept_rows(path: Path) -> ReviewedSheet:
    """The experts' sheet (``01_crawl/review.csv`` after review): every cell's neutralisation undone, each
    decision ``keep``, ``drop`` or empty; a kept row needs a category of the 16, ``statement_fa``,
    ``target_group`` and ``non_target_groups``."""
    frame = _read_sheet(path)
    missing = [column for column in REVIEW_COLUMNS if column not in frame.columns]
    if missing:
        raise InputError(path, 1, f"missing column(s) {', '.join(missing)}")
    frame = frame.map(lambda cell: restore_cell(cell).strip())
    decisions = frame["decision"].str.lower()
    bad = ~decisions.isin([*DECISIONS, ""])
    if bad.any():
        index = bad.idxmax()
        raise InputError(
            path, spreadsheet_row(index), f"decision {frame.at[index, 'decision']!r} is not keep, drop or empty"
        )
    kept = frame[decisions == "keep"]
    for index, row in kept.iterrows():
        for column in ("statement_fa", "target_group", "non_target_groups"):
            if not row[column]:
                raise InputError(path, spreadsheet_row(index), f"kept row has an empty {column}")
        if row["category"] not in CATEGORIES:
            raise InputError(path, spreadsheet_row(index), not_one_of(row["category"]))
    table = pd.DataFrame(
        {
            "row": [spreadsheet_row(i) for i in kept.index],
            "cluster_id": kept["cluster_id"],
            "category": kept["category"],
            "statement_fa": kept["statement_fa"].map(normalize_fa),
            "statement_en": kept["statement_en"],
            "target_group": kept["target_group"].map(normalize_fa),
            "non_target_groups": kept["non_target_groups"].map(
                lambda cell: ";".join(normalize_fa(part) for part in cell.split(";") if part.strip())
            ),
            "source": "crawl",
        }
    ).reset_index(drop=True)
    counts = Counter(decisions.replace("", "undecided"))
    return ReviewedSheet(table, {name: counts.get(name, 0) for name in (*DECISIONS, "undecided")})


@dataclass
class QuestionnaireUpdate:
    path: Path
    added: pd.DataFrame
    """The new questionnaire rows, with their ids."""
    questionnaire: pd.DataFrame
    """The questionnaire with the new rows, as :func:`load_questionnaire` reads it."""
    data: bytes | None
    """The file's new bytes (None: no row added, the file stays as it is)."""
    already: list[dict[str, Any]] = field(default_factory=list)
    """Kept rows whose statement the questionnaire (or an earlier row of the sheet) already holds."""

    def write(self) -> None:
        if self.data is not None:
            atomic_write_bytes(self.path, self.data)


def _next_numbers(ids: Sequence[str]) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for stereotype_id in ids:
        match = re.fullmatch(r"([A-Z]+)-(\d+)", stereotype_id)
        if match:
            numbers[match.group(1)] = max(numbers.get(match.group(1), 0), int(match.group(2)))
    return numbers


def questionnaire_update(path: Path, sheet: ReviewedSheet) -> QuestionnaireUpdate:
    """The kept rows appended to the questionnaire at ``path`` (created when missing) with new ids, checked as
    the build reads the file; nothing is written (:meth:`QuestionnaireUpdate.write` does)."""
    existing = load_questionnaire(path) if path.is_file() else pd.DataFrame(columns=QUESTIONNAIRE_COLUMNS)
    numbers = _next_numbers(list(existing["stereotype_id"]))
    known = {statement: sid for statement, sid in zip(existing["statement_fa"], existing["stereotype_id"], strict=True)}
    added, already = [], []
    for row in sheet.kept.itertuples():
        if row.statement_fa in known:
            already.append({"row": row.row, "cluster_id": row.cluster_id, "stereotype_id": known[row.statement_fa]})
            continue
        code = SURVEY_CODES[row.category]
        numbers[code] = numbers.get(code, 0) + 1
        stereotype_id = f"{code}-{numbers[code]:02d}"
        known[row.statement_fa] = stereotype_id
        added.append({"stereotype_id": stereotype_id, **{c: getattr(row, c) for c in QUESTIONNAIRE_COLUMNS[1:]}})
    new = pd.DataFrame(added, columns=QUESTIONNAIRE_COLUMNS)
    data = None
    if len(new):
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not old:
            writer.writerow(QUESTIONNAIRE_COLUMNS)
        elif not old.endswith("\n"):
            buffer.write("\n")
        writer.writerows(new.itertuples(index=False))
        data = (old + buffer.getvalue()).encode("utf-8")
    table = existing if data is None and path.is_file() else load_questionnaire(path, data)
    _check_titles(table, path)
    return QuestionnaireUpdate(path, new, table, data, already)


# --- the form ------------------------------------------------------------------------------------------------


def _check_titles(questionnaire: pd.DataFrame, where: Path | None) -> None:
    titles = Counter(questionnaire["statement_fa"])
    reserved = {normalize_fa(title) for title, _ in DEMOGRAPHIC_QUESTIONS.values()} | {normalize_fa(WRITE_IN_TITLE)}
    for statement, stereotype_id in zip(questionnaire["statement_fa"], questionnaire["stereotype_id"], strict=True):
        if titles[statement] > 1 or statement in reserved:
            raise InputError(
                where or Path("questionnaire"),
                None,
                f"stereotype {stereotype_id}: its statement is the title of another question; form questions "
                "are matched by their titles, so every statement must be unique",
            )


def form_table(questionnaire: pd.DataFrame, version: int, seed: int) -> pd.DataFrame:
    """Form version ``version``: demographics, the statements in a seeded shuffled order, the write-in."""
    _check_titles(questionnaire, None)
    rows = [
        {
            "question_id": column,
            "type": "multiple_choice",
            "title": title,
            "help": "",
            "options": ";".join(options),
            "required": "yes",
        }
        for column, (title, options) in DEMOGRAPHIC_QUESTIONS.items()
    ]
    order = np.random.default_rng([seed, version]).permutation(len(questionnaire))
    for index in order:
        rows.append(
            {
                "question_id": questionnaire["stereotype_id"].iloc[index],
                "type": "multiple_choice",
                "title": questionnaire["statement_fa"].iloc[index],
                "help": STATEMENT_HELP,
                "options": ";".join(YES_NO),
                "required": "no",
            }
        )
    rows.append(
        {
            "question_id": WRITE_IN,
            "type": "paragraph",
            "title": WRITE_IN_TITLE,
            "help": "",
            "options": "",
            "required": "no",
        }
    )
    table = pd.DataFrame(rows)
    table.insert(0, "position", range(1, len(table) + 1))
    table.insert(0, "form_version", version)
    return table[FORM_COLUMNS]


def form_files(questionnaire: pd.DataFrame, folder: Path, versions: int, seed: int) -> dict[Path, bytes]:
    """The bytes of ``folder/form-v<k>.csv`` for k = 1..versions (UTF-8 with a BOM, cells neutralised)."""
    if versions < 1:
        raise ValueError(f"versions must be >= 1, not {versions}")
    if seed < 0:
        raise ValueError(f"the seed must be >= 0, not {seed}")
    return {
        folder / f"form-v{version}.csv": people_csv(form_table(questionnaire, version, seed))
        for version in range(1, versions + 1)
    }


# --- the form tool's export back into responses.csv ----------------------------------------------------------


@dataclass
class ImportedResponses:
    responses: pd.DataFrame
    """``respondent_id``, the Appendix E columns, one column per stereotype id (``yes``, ``no`` or empty)."""
    write_ins: pd.DataFrame
    """``respondent_id``, ``text`` (scrubbed) of every non-empty write-in."""
    report: dict[str, Any]


def _title_map(questionnaire: pd.DataFrame) -> dict[str, str]:
    titles = {normalize_fa(title): column for column, (title, _) in DEMOGRAPHIC_QUESTIONS.items()}
    titles |= {column: column for column in DEMOGRAPHIC_COLUMNS}
    titles |= {
        statement: sid
        for statement, sid in zip(questionnaire["statement_fa"], questionnaire["stereotype_id"], strict=True)
    }
    titles[normalize_fa(WRITE_IN_TITLE)] = WRITE_IN
    return titles


def _read_export(path: Path, titles: dict[str, str]) -> tuple[pd.DataFrame, list[str]]:
    """The export's answers with columns renamed to question ids; the timestamp column dropped."""
    frame = _read_sheet(path)
    header = [restore_cell(str(column)).strip() for column in frame.columns]
    if not header or header[0] not in TIMESTAMP_COLUMNS:
        raise InputError(path, 1, f"the first column must be the timestamp ({', '.join(TIMESTAMP_COLUMNS)})")
    if frame.empty:
        raise InputError(path, None, "no submissions: the export has a header only (leave it out of --export)")
    ids, unknown = [], []
    for title in header[1:]:
        key = normalize_fa(re.sub(r"\.\d+$", "", title) if title not in titles else title)
        if key not in titles:
            unknown.append(title)
        ids.append(titles.get(key, ""))
    if unknown:
        shown = "; ".join(repr(title[:60]) for title in unknown)
        raise InputError(
            path,
            1,
            f"unknown column(s) {shown}: not a question of the questionnaire or of Appendix E (a form tool "
            "that also collects e-mail addresses or names must not: the survey is anonymous, PBBQ §3.2)",
        )
    repeated = [question for question, n in Counter(ids).items() if n > 1]
    if repeated:
        raise InputError(path, 1, f"question(s) {', '.join(repeated)} appear in more than one column")
    answers = frame.iloc[:, 1:].map(lambda cell: normalize_fa(restore_cell(cell)))
    answers.columns = ids
    return answers, ids


def _answer(value: str, options: dict[str, str], path: Path, row: int, question: str) -> str:
    if not value:
        return ""
    lowered = value.lower()
    if lowered in options:
        return options[lowered]
    raise InputError(path, row, f"answer {value!r} to {question} is not one of {', '.join(options)} or empty")


def read_form_exports(paths: Sequence[Path], questionnaire: pd.DataFrame) -> ImportedResponses:
    """``survey/responses.csv`` from one or more form exports (one per form version), respondents numbered
    ``R001``… in file and row order. A submission whose every answer equals an earlier one's is a duplicate:
    left out and reported with both rows."""
    titles = _title_map(questionnaire)
    stereotype_ids = list(questionnaire["stereotype_id"])
    demographic_options = {
        column: {normalize_fa(label).lower(): value for label, value in options.items()}
        | {value.lower(): value for value in options.values()}
        for column, (_, options) in DEMOGRAPHIC_QUESTIONS.items()
    }
    yes_no = {normalize_fa(spelling).lower(): value for spelling, value in ANSWER_SPELLINGS.items()}
    records, write_ins, duplicates = [], [], []
    first_seen: dict[tuple[str, ...], str] = {}
    asked: set[str] = set()
    for path in paths:
        answers, ids = _read_export(path, titles)
        asked.update(ids)
        for index, row in answers.iterrows():
            number = spreadsheet_row(index)
            record = {column: "" for column in (*DEMOGRAPHIC_COLUMNS, *stereotype_ids)}
            write_in = ""
            for question, value in row.items():
                if question == WRITE_IN:
                    write_in = value
                elif question in demographic_options:
                    record[question] = _answer(value, demographic_options[question], path, number, question)
                else:
                    record[question] = _answer(value, yes_no, path, number, question)
            key = (*record.values(), write_in)
            where = f"{path.name} row {number}"
            if key in first_seen:
                duplicates.append({"submission": where, "same_as": first_seen[key]})
                continue
            first_seen[key] = where
            records.append(record)
            if write_in:
                write_ins.append((len(records), write_in))
    width = max(3, len(str(len(records))))
    responses = pd.DataFrame(records, columns=[*DEMOGRAPHIC_COLUMNS, *stereotype_ids])
    responses.insert(0, "respondent_id", [f"R{i:0{width}d}" for i in range(1, len(records) + 1)])
    scrubbed: Counter[str] = Counter()
    texts = []
    for number, text in write_ins:
        result = scrub_segments([(text, None)])
        scrubbed.update(result.counts)
        texts.append({"respondent_id": f"R{number:0{width}d}", "text": result.text})
    missing = {
        column: int((responses[column] == "").sum())
        for column in (*DEMOGRAPHIC_COLUMNS, *stereotype_ids)
        if column in asked and (responses[column] == "").any()
    }
    report = {
        "exports": [str(path) for path in paths],
        "respondents": len(responses),
        "duplicates": duplicates,
        "missing_answers": missing,
        "not_in_any_export": [column for column in (*DEMOGRAPHIC_COLUMNS, *stereotype_ids) if column not in asked],
        "write_ins": len(texts),
        "write_ins_scrubbed": dict(scrubbed),
    }
    return ImportedResponses(responses, pd.DataFrame(texts, columns=["respondent_id", "text"]), report)
