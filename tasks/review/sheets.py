"""A round on disk, and its spreadsheet round trip. What goes to a reviewer: ``HOW_TO_REVIEW.md`` and their own
sheet (``sheets/<reviewer>.csv``: their items, what they need to judge each, and empty columns for the answers).
What the lead keeps: ``round.json`` (what the round is, who reviews) and the key, ``key/items.csv`` (every item with
what a reviewer must not see: the group a name is meant to signal) and ``key/assignment.csv`` (who judges what).
The sheets come back as the decisions table (:mod:`.decisions`). Every CSV is spreadsheet-safe (a cell starting
with ``= + - @`` gets a leading ``'``, undone on reading) and UTF-8 with a BOM; in a sheet, a cell in a language
written right to left starts with a RIGHT-TO-LEFT MARK, so a spreadsheet lays it out right to left even when it
starts with ``{stereo}`` or a Latin word (taken off again on reading)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ..core.artifacts import FORMULA_START
from ..core.inputs import InputError, read_csv_checked, spreadsheet_row
from .decisions import DECISION_COLUMNS, check_decisions
from .items import ITEM_COLUMNS, QUESTIONS, base_kind
from .rounds import ASSIGNMENT_COLUMNS

ANSWER_COLUMNS = ["verdict", "fix_text", "reason"]
SHEET_INFO = ["round_id", "reviewer", "kind", "item_id", "hash", "category", "lang", "source_text", "machine_output"]
SHEET_INFO += ["stereotype", "rules", "details", "questions"]
KEY = "key"
"""The round's folder for the lead only: ``items.csv`` and ``assignment.csv`` (never sent to a reviewer)."""
RLM = "\u200f"
"""RIGHT-TO-LEFT MARK: a cell starting with it is laid out right to left (its first strong character)."""
BIDI_MARKS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Direction marks and isolates a cell may start or end with (a sheet's, or one a spreadsheet or a copied cell adds);
taken off on reading. Not the ZERO WIDTH NON-JOINER, which is Persian spelling."""
RIGHT_TO_LEFT_SCRIPTS = frozenset({"Arabic", "Hebrew", "Syriac", "Thaana", "Nko", "Adlam", "Mandaic", "Samaritan"})
"""Scripts written right to left (Unicode's bidirectional class R or AL)."""
TEXT_LANGUAGE = {"source_text": "source_lang", "stereotype": "source_lang", "details": "source_lang"}
TEXT_LANGUAGE |= {"machine_output": "lang"}
"""A sheet's text columns and the item column naming the language each is in."""


def right_to_left(lang: str) -> bool:
    """Whether a language is written right to left: its script as declared in :mod:`pbbq.tasks.text.languages`
    (``script_name``); a language not declared there is taken as left to right."""
    from ..text.languages import LANGUAGES

    declared = LANGUAGES.get(lang)
    return declared is not None and declared.script_name in RIGHT_TO_LEFT_SCRIPTS


def people_csv(frame: pd.DataFrame, directions: dict[str, pd.Series] | None = None) -> bytes:
    """A CSV for people: UTF-8 with a BOM, every cell spreadsheet-safe (as :func:`spreadsheet_safe` makes it, a
    column at a time); ``directions``: per column, the rows whose (non-empty) cell is right to left, which then
    starts with :data:`RLM`."""
    safe = frame.astype(object).where(frame.notna(), "").astype(str)
    for column in safe.columns:
        cells = safe[column]
        safe[column] = cells.where(~cells.str.startswith(FORMULA_START, na=False), "'" + cells)
    for column, rtl in (directions or {}).items():
        cells = safe[column]
        safe[column] = cells.where(~(rtl.to_numpy(dtype=bool) & (cells != "")), RLM + cells)
    return ("\ufeff" + safe.to_csv(index=False, lineterminator="\n")).encode("utf-8")


def restored(frame: pd.DataFrame) -> pd.DataFrame:
    """A table read from a CSV for people, every cell as it was before :func:`people_csv` protected it (direction
    marks at its ends and the leading ``'`` of a cell that starts like a formula taken off, a column at a time)."""
    frame = frame.copy()
    for column in frame.columns:
        cells = frame[column].astype(str)
        marked = cells.str.startswith(tuple(BIDI_MARKS)) | cells.str.endswith(tuple(BIDI_MARKS))
        if marked.any():
            cells = cells.where(~marked, cells.str.strip(BIDI_MARKS))
        rest = cells.str[1:]
        protected = cells.str.startswith("'") & rest.str.startswith((*FORMULA_START, "'"))
        frame[column] = cells.where(~protected, rest)
    return frame


def question_keys(kinds: Iterable[str]) -> list[str]:
    """The answer columns of a sheet holding ``kinds``: each question's key once, in the kinds' order."""
    return list(dict.fromkeys(q.key for kind in kinds for q in QUESTIONS[base_kind(kind)]))


def _questions_text(kind: str) -> str:
    return " | ".join(
        f"{q.key}: {q.text}" + (f" [{' / '.join(q.choices)}]" if q.choices else "") for q in QUESTIONS[base_kind(kind)]
    )


def _file_name(reviewer: str) -> str:
    return re.sub(r"[^\w.-]+", "_", reviewer) + ".csv"


INSTRUCTIONS = """# How to review this round ({round_id})

You have this file and one sheet, your own (`<your name>.csv`): a row per item to judge. Open it in a spreadsheet
(UTF-8; Persian and Urdu cells read right to left) and fill, on every row, the empty columns on the right; change
nothing else.

What each row shows: `kind` (what is judged), `source_text` (what the machine started from), `machine_output`
(what the machine wrote or judged: this is what you judge), `stereotype` (the belief the example tests; judge the
text, not the belief), `rules` (the checks the machine already passed: you need not check them again), `details`
(what else you need: the two questions of a context, the glossary of a translation and, for a piece of a sentence,
the sentence it occurs in, the groups a name may signal).

In a template, `{{stereo}}` and `{{nonstereo}}` stand for the two people (`details` names them: `{{stereo}}` is the
one the stereotype is about) and `{{lex}}` for a word the build varies (a place, an occasion). A translated context
says whether it is ambiguous, disambiguated as the stereotype has it, or against it (counter-biased): a context that
contradicts the stereotype is meant to; judge whether the translation says what its source says.

Answer the questions the `questions` column lists for that row (leave the others empty):
{questions}

Then the verdict (`verdict` column), one of:
- `accept`: the machine's text can stay as it is (a name: it signals the group and gender you answered);
- `fix`: write the corrected text in `fix_text` (a context keeps `{{stereo}}` and `{{nonstereo}}` exactly; a name
  is not fixed: accept or reject it);
- `reject`: the item must go; say why in `reason`.

A row left without a verdict is not counted. Each item has at least one other reviewer, whose name you are not
given; do not confer before you have answered. A cell that starts with `'` was protected from being read as a
formula: leave the `'` in place. A Persian or Urdu cell starts with an invisible right-to-left mark so that it lays
out right to left; leave it, or not: it is taken off on reading.
"""


def write_round(
    folder: Path, items: pd.DataFrame, assignment: pd.DataFrame, meta: dict, kinds: Sequence[str]
) -> list[Path]:
    """The round's files in ``folder``; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sheets").mkdir(exist_ok=True)
    (folder / KEY).mkdir(exist_ok=True)
    keys = question_keys(kinds)
    written = []
    questions = "\n".join(
        f"- `{q.key}` ({base_kind(kind)}): {q.text}" + (f" Answer {' / '.join(q.choices)}." if q.choices else "")
        for kind in dict.fromkeys(base_kind(k) for k in kinds)
        for q in QUESTIONS[kind]
    )
    files = {
        "round.json": json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8") + b"\n",
        f"{KEY}/items.csv": people_csv(items[ITEM_COLUMNS]),
        f"{KEY}/assignment.csv": people_csv(assignment[ASSIGNMENT_COLUMNS]),
        "HOW_TO_REVIEW.md": INSTRUCTIONS.format(round_id=meta["round_id"], questions=questions).encode("utf-8"),
    }
    info = assignment.merge(items, on=["kind", "item_id", "hash"], how="left")
    info["questions"] = info["kind"].map(_questions_text)
    rtl = {lang: right_to_left(lang) for lang in {*items["lang"], *items["source_lang"]}}
    for reviewer, rows in info.groupby("reviewer", sort=True):
        sheet = rows[SHEET_INFO].assign(**{key: "" for key in keys}, **{c: "" for c in ANSWER_COLUMNS})
        directions = {column: rows[lang].map(rtl) for column, lang in TEXT_LANGUAGE.items()}
        files[f"sheets/{_file_name(str(reviewer))}"] = people_csv(sheet, directions)
    for name, data in files.items():
        path = folder / name
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        written.append(path)
    return written


def read_round(folder: Path, with_items: bool = True) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """A round's ``round.json``, items (without ``with_items``: none, an import needs the assignment only) and
    assignment (both from its key folder)."""
    meta_path = folder / "round.json"
    if not meta_path.is_file():
        raise InputError(meta_path, None, "file not found: not a review round folder (pbbq review export makes one)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(meta_path, exc.lineno, f"not JSON ({exc.msg})") from None
    items = (
        restored(read_csv_checked(folder / KEY / "items.csv", ITEM_COLUMNS, allow_empty=True))
        if with_items
        else pd.DataFrame(columns=ITEM_COLUMNS)
    )
    assignment = restored(read_csv_checked(folder / KEY / "assignment.csv", ASSIGNMENT_COLUMNS, allow_empty=True))
    return meta | {"folder": str(folder)}, items, assignment


def sheet_decisions(path: Path, assignment: pd.DataFrame) -> pd.DataFrame:
    """A reviewer's filled sheet as decisions: the rows with a verdict, each checked against the round's
    assignment (its reviewer was given that item, with that hash: a sheet cannot judge what it was not shown)."""
    read = read_csv_checked(path, [*SHEET_INFO[:5], *ANSWER_COLUMNS], allow_empty=True)
    asked = question_keys(QUESTIONS)
    sheet = restored(read[[c for c in read.columns if c in (*SHEET_INFO[:5], *ANSWER_COLUMNS, *asked)]])
    answered = sheet[sheet["verdict"] != ""]
    keys = ["reviewer", "kind", "item_id"]
    given = answered[keys].merge(assignment[[*keys, "hash"]], on=keys, how="left")["hash"]
    for index, row_hash, expected in zip(answered.index, answered["hash"], given, strict=True):
        if not isinstance(expected, str):
            problem = f"item {sheet.at[index, 'item_id']} was not given to {sheet.at[index, 'reviewer']}"
            raise InputError(path, spreadsheet_row(int(index)), problem)
        if expected != row_hash:
            raise InputError(
                path, spreadsheet_row(int(index)), f"item {sheet.at[index, 'item_id']}: its hash was changed"
            )
    columns = {
        kind: [q.key for q in QUESTIONS[base_kind(kind)] if q.key in sheet.columns] for kind in set(answered["kind"])
    }
    answers = pd.Series("", index=answered.index, dtype=object)
    for kind, rows in answered.groupby("kind", sort=False):
        keys = sorted(columns[kind])
        values = zip(*(rows[key].tolist() for key in keys), strict=True) if keys else ((),) * len(rows)
        answers[rows.index] = [
            json.dumps({k: v for k, v in zip(keys, said, strict=True) if v}, ensure_ascii=False, sort_keys=True)
            for said in values
        ]
    frame = answered[DECISION_COLUMNS[:-1]].assign(answers=answers).reset_index(drop=True)
    try:
        return check_decisions(frame, path)
    except InputError as error:  # name the sheet's row, not the answered rows' count
        if error.row is None:
            raise
        raise InputError(path, spreadsheet_row(int(answered.index[error.row - 2])), error.problem) from None


def write_decisions(path: Path, decisions: pd.DataFrame) -> None:
    """The decisions table, spreadsheet-safe (a build reads it back with :func:`~.decisions.load_decisions`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(people_csv(decisions[DECISION_COLUMNS]))
    tmp.replace(path)
