"""The adaptation review sheet (PakBBQ §3.1, after KoBBQ): one row per BBQ template, the class the experts give
it and the columns they edit.

- **DT** (direct translation): BBQ's text and groups as they are; the instances are translated later. A DT row
  fills no ``target_…`` column (or fills one with BBQ's own value).
- **TM** (target modified): the groups, the text or both changed for the target culture (narrowing
  ``target_other_groups`` alone is TM); a ``target_…`` field left empty keeps BBQ's. A TM row that changes
  nothing is refused: it is DT.
- **NA** (newly added): a row the experts append, every text field and the stereotyped groups their own, of one of
  the categories BBQ's generator builds (:data:`BUILT_CATEGORIES`).
- **SR** (simply removed): not built, with the experts' reason.

A row without a class is unreviewed: the sheet is refused, naming every such row's id. Loading checks every cell a
build reads (:func:`load_reviewed_sheet`), so a sheet that loads builds what it says: no unknown column, ids and
group names without placeholder syntax, control or bidi characters and within :data:`MAX_NAME_LENGTH`, no two ids
or groups that differ only in case, every placeholder one of :data:`PLACEHOLDERS`, and ``bbq_proper_nouns_only``
one of :data:`FLAGS`.

BBQ's filling rules of a template (its ``Names`` lists, ``NAME1_info``/``NAME2_info`` and ``Proper_nouns_only``) are
carried in ``bbq_…`` columns the experts do not edit; a sheet written before they existed reads them as empty.
Groups are ``;``-separated. ``target_other_groups`` names the groups a stereotyped group is paired with; empty,
they are the category's other vocabulary groups (BBQ's rule). The sheet is written spreadsheet-safe (a cell that
would start a formula gets a ``'``) and read back with the ``'`` taken off.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..core.artifacts import from_spreadsheet, spreadsheet_safe
from ..core.inputs import LIST_SEPARATOR, InputError, read_csv_checked, require_none, spreadsheet_row
from .bbq_format import (
    NAMED_CATEGORIES,
    PAIRED_CATEGORIES,
    TEXT_FIELDS,
    parse_groups,
    parse_lexical_diversity,
    text_problem,
)
from .intersectional_format import INTERSECTIONAL_CATEGORIES, SECOND_ATTRIBUTE_SLOTS, second_attribute

CLASSES = ("DT", "TM", "NA", "SR")
BBQ_COLUMNS = [f"bbq_{field}" for field in TEXT_FIELDS]
RULE_COLUMNS = {
    "bbq_names": "Names",
    "bbq_name1_info": "NAME1_info",
    "bbq_name2_info": "NAME2_info",
    "bbq_proper_nouns_only": "Proper_nouns_only",
}
"""The sheet's columns of BBQ's filling rules → BBQ's columns (optional when a sheet is read)."""
TARGET_COLUMNS = [f"target_{field}" for field in TEXT_FIELDS]
SHEET_COLUMNS = [
    "template_id",
    "class",
    "category",
    "subcategory",
    "question_index",
    "bbq_stereotyped_groups",
    *BBQ_COLUMNS,
    *RULE_COLUMNS,
    "relevant_social_values",
    "source",
    "target_stereotyped_groups",
    "target_other_groups",
    *TARGET_COLUMNS,
    "reason",
]
"""The sheet's columns: what BBQ says of a template, then what the experts fill (from ``class`` on, the
``target_…`` columns and ``reason``)."""
EDITED = ["target_stereotyped_groups", "target_other_groups", *TARGET_COLUMNS]
BBQ_OF = {"target_stereotyped_groups": "bbq_stereotyped_groups"} | {
    f"target_{field}": f"bbq_{field}" for field in TEXT_FIELDS
}
"""Each edited column → the BBQ column it replaces (``target_other_groups`` replaces BBQ's rule, no column)."""
BUILT_CATEGORIES = (*PAIRED_CATEGORIES, *NAMED_CATEGORIES, *INTERSECTIONAL_CATEGORIES)
"""The categories BBQ's generator builds, by this port's rules: an NA row takes one of them (a new category would
need its own filling rule)."""
PLACEHOLDERS = ("{{NAME1}}", "{{NAME2}}", "{{WORD1}}", "{{WORD2}}")
"""The placeholders a template text may hold (BBQ's ``do_slotting``), in exactly this spelling."""
FLAGS = {"true": True, "yes": True, "false": False, "no": False, "": False}
"""A yes/no cell (``bbq_proper_nouns_only``), in any case; empty is no."""
MAX_NAME_LENGTH = 100
"""The longest template id or group name: ids flow into every example id, groups into every text."""
_DOUBLE_BRACED = re.compile(r"\{\{[^{}]*\}\}")
_PLACEHOLDER_SYNTAX = re.compile(r"[{}]|\[\[|\]\]")
_strings = pa.list_(pa.string())
ADAPTED_TEMPLATE = pa.schema(
    [
        ("template_id", pa.string()),
        ("class", pa.string()),
        ("category", pa.string()),
        ("subcategory", pa.string()),
        ("question_index", pa.string()),
        *[(field, pa.string()) for field in TEXT_FIELDS],
        ("stereotyped_groups", _strings),
        ("other_groups", _strings),
        ("restricted", pa.bool_()),
        ("names", pa.string()),
        ("name1_info", pa.string()),
        ("name2_info", pa.string()),
        ("proper_nouns_only", pa.bool_()),
        ("source", pa.string()),
        ("removal_reason", pa.string()),
    ]
)
"""A template after its class is applied. ``restricted``: its stereotyped groups are BBQ's, so only those in the
vocabulary are built (BBQ's ``targeted_word_list``); the experts' own groups are built as they are given."""


def template_id(row: pd.Series) -> str:
    """A BBQ template's id: its category, ``Q_id`` and ``version`` (``Religion-2``, ``SES-1a``)."""
    return f"{row.Category}-{row.Q_id}{row.get('version', '')}"


def review_sheet(templates: pd.DataFrame) -> pd.DataFrame:
    """The sheet for BBQ templates (rows of :func:`~pbbq.tasks.adapt.bbq_format.load_bbq_templates`, stacked),
    the experts' columns empty."""
    sheet = pd.DataFrame(
        {
            "template_id": templates.apply(template_id, axis=1).astype(str),
            "category": templates["Category"],
            "subcategory": templates.get("Subcategory", pd.Series("", index=templates.index)),
            "question_index": templates["Q_id"],
            "bbq_stereotyped_groups": templates["Known_stereotyped_groups"].map(
                lambda value: LIST_SEPARATOR.join(parse_groups(value))
            ),
            **{f"bbq_{field}": templates[column] for field, column in TEXT_FIELDS.items()},
            **{
                column: templates.get(bbq, pd.Series("", index=templates.index)) for column, bbq in RULE_COLUMNS.items()
            },
            "relevant_social_values": templates.get("Relevant_social_values", pd.Series("", index=templates.index)),
            "source": templates["Notes"],
        }
    )
    return spreadsheet_safe(sheet.reindex(columns=SHEET_COLUMNS, fill_value="").reset_index(drop=True))


def _groups(value: str) -> list[str]:
    return [group.strip() for group in value.split(LIST_SEPARATOR) if group.strip()]


def _changed(row: pd.Series) -> list[str]:
    """The edited columns whose value is not BBQ's (``target_other_groups``: any value, BBQ gives none)."""
    return [column for column in EDITED if row[column] and row[column] != row.get(BBQ_OF.get(column, ""), None)]


def _row_problem(row: pd.Series) -> str | None:
    """What is wrong with one reviewed row's class and columns, or None."""
    kind = row["class"]
    if kind not in CLASSES:
        return f"class {kind!r} is not one of {', '.join(CLASSES)}"
    if kind == "SR":
        return None if row.reason else "SR (simply removed) needs its reason"
    if row.category not in BUILT_CATEGORIES:
        return f"category {row.category!r} is not one BBQ's generator builds ({', '.join(BUILT_CATEGORIES)})"
    changed = _changed(row)
    if kind == "DT" and changed:
        return (
            f"DT keeps BBQ's text and groups but {changed[0]} changes it: class the row TM "
            "(TM may change the groups, the text or both)"
        )
    if kind == "TM" and not changed:
        return "TM (target modified) changes the groups, the text or both, but no target_ column does: class it DT"
    if kind == "NA":
        empty = [column for column in ("category", "target_stereotyped_groups", *TARGET_COLUMNS) if not row[column]]
        empty = [column for column in empty if column != "target_lexical_diversity"]
        if empty:
            return f"NA (newly added) needs {empty[0]}"
    elif not row.bbq_ambiguous:
        return f"{kind} applies to a BBQ template, but the row has no bbq_ambiguous"
    if row.category in INTERSECTIONAL_CATEGORIES:
        try:
            second_attribute(row.get("bbq_names", ""), row.category)
        except ValueError as exc:
            return f"{kind} {row.category} row: bbq_names: {exc}"
    problem = _names_problem(row) or _placeholder_problem(row) or text_problem(_texts(row))
    return f"{kind} template: {problem}" if problem else None


def name_problem(name: str, what: str) -> str | None:
    """What makes a template id or a group name unusable (it is written into every example of the template), or
    None: placeholder syntax, a control, format (bidi) or line-breaking character, more than
    :data:`MAX_NAME_LENGTH` characters."""
    if len(name) > MAX_NAME_LENGTH:
        return f"{what} of {len(name)} characters (at most {MAX_NAME_LENGTH})"
    if _PLACEHOLDER_SYNTAX.search(name):
        return f"{what} {name!r} holds placeholder syntax ({{ }}, [[ ]])"
    bad = next((char for char in name if unicodedata.category(char)[0] == "C" or char in "\u2028\u2029"), None)
    if bad is not None:
        return f"{what} {name!r} holds the control or bidi character U+{ord(bad):04X}"
    return None


def _names_problem(row: pd.Series) -> str | None:
    """The first unusable group name or lexical word of a row's groups, naming its column, or None; a group named
    twice (in any case) or both stereotyped and compared with is one too."""
    seen: dict[str, str] = {}
    for column in ("target_stereotyped_groups", "target_other_groups"):
        for group in _groups(row[column]):
            problem = name_problem(group, "group")
            if problem:
                return f"{column}: {problem}"
            if group.casefold() in seen:
                first = seen[group.casefold()]
                return f"{column}: group {group!r} is also {first!r} (groups differing only in case are one group)"
            seen[group.casefold()] = group
    column = "target_lexical_diversity" if row.target_lexical_diversity else "bbq_lexical_diversity"
    try:
        words = [word for listed in parse_lexical_diversity(row[column]).values() for word in listed]
    except ValueError:
        return None  # text_problem names the shape
    problem = next((found for word in words if (found := name_problem(word, "word"))), None)
    return f"{column}: {problem}" if problem else None


def _placeholder_problem(row: pd.Series) -> str | None:
    """The first text a row builds from (the experts' where they wrote one, else BBQ's) holding a placeholder
    that is not one of :data:`PLACEHOLDERS` (and, in Race_x_gender and Race_x_SES, the second attribute's slots) or
    a brace outside one, naming its column, or None."""
    known = PLACEHOLDERS + (SECOND_ATTRIBUTE_SLOTS if row.category in INTERSECTIONAL_CATEGORIES else ())
    for field in TEXT_FIELDS:
        if field == "lexical_diversity":
            continue
        column = f"target_{field}" if row[f"target_{field}"] else f"bbq_{field}"
        text = row[column]
        unknown = [found for found in _DOUBLE_BRACED.findall(text) if found not in known]
        if unknown:
            return f"{column}: unknown placeholder {unknown[0]} (known: {', '.join(known)})"
        stray = _PLACEHOLDER_SYNTAX.search(_DOUBLE_BRACED.sub("", text))
        if stray:
            return f"{column}: {stray.group()!r} outside a placeholder (placeholders are {', '.join(known)})"
    return None


def _texts(row: pd.Series) -> dict[str, str]:
    """The text fields a row's class gives: the experts' where they wrote one, else BBQ's."""
    return {field: row[f"target_{field}"] or row[f"bbq_{field}"] for field in TEXT_FIELDS}


def load_reviewed_sheet(path: Path) -> pd.DataFrame:
    """The reviewed sheet, every row checked: one :class:`InputError` naming the file, the row (and the column)
    and the problem for an unknown column, rows without a class (every id named), an unknown class or category,
    an SR without its reason, a DT that changes BBQ's text or groups, a TM that changes nothing, an NA without its
    text or groups, a template text without both slots or with a placeholder that is not one of
    :data:`PLACEHOLDERS`, an unusable template id or group name (:func:`name_problem`), a template id repeated
    (also in another case), or a ``bbq_proper_nouns_only`` that is not one of :data:`FLAGS`."""
    required = [column for column in SHEET_COLUMNS if column not in RULE_COLUMNS]
    frame = read_csv_checked(path, required)
    unknown = [column for column in frame.columns if column not in SHEET_COLUMNS]
    if unknown:
        raise InputError(
            path, 1, f"unknown column(s) {', '.join(map(repr, unknown))}: the sheet's columns are pbbq adapt's"
        )
    frame = frame.reindex(columns=SHEET_COLUMNS, fill_value="").map(from_spreadsheet)
    frame["class"] = frame["class"].str.upper()
    require_none(path, frame["template_id"] == "", lambda _: "empty template_id")
    for index, template in frame["template_id"].items():
        problem = name_problem(template, "template_id") or (
            f"template_id {template!r} holds a space" if re.search(r"\s", template) else None
        )
        if problem:
            raise InputError(path, spreadsheet_row(index), problem)
    folded = frame["template_id"].str.casefold()
    require_none(
        path,
        folded.duplicated(),
        lambda i: (
            f"template_id {frame.at[i, 'template_id']!r} appears twice "
            f"(as {frame.loc[folded == folded[i], 'template_id'].iloc[0]!r}; ids differing only in case are one id)"
        ),
    )
    unreviewed = frame.index[frame["class"] == ""]
    if len(unreviewed):
        ids = ", ".join(frame.loc[unreviewed[:10], "template_id"]) + (", …" if len(unreviewed) > 10 else "")
        raise InputError(
            path, spreadsheet_row(unreviewed[0]), f"{len(unreviewed)} row(s) not reviewed (no class): {ids}"
        )
    require_none(
        path,
        ~frame["bbq_proper_nouns_only"].str.lower().isin(FLAGS),
        lambda i: f"bbq_proper_nouns_only {frame.at[i, 'bbq_proper_nouns_only']!r} is not true/false/yes/no",
    )
    for index, row in frame.iterrows():
        problem = _row_problem(row)
        if problem:
            raise InputError(path, spreadsheet_row(index), problem)
    return frame


def apply_classes(sheet: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The templates the classes give (DT, TM, NA) and the removed ones (SR, with ``removal_reason``), both of
    :data:`ADAPTED_TEMPLATE`."""
    rows = []
    for _, row in sheet.iterrows():
        own_groups = _groups(row.target_stereotyped_groups)
        rows.append(
            {
                "template_id": row.template_id,
                "class": row["class"],
                "category": row.category,
                "subcategory": row.subcategory,
                "question_index": row.question_index or row.template_id,
                **_texts(row),
                "stereotyped_groups": own_groups or _groups(row.bbq_stereotyped_groups),
                "other_groups": _groups(row.target_other_groups),
                "restricted": not own_groups,
                "names": row.get("bbq_names", ""),
                "name1_info": row.get("bbq_name1_info", ""),
                "name2_info": row.get("bbq_name2_info", ""),
                "proper_nouns_only": FLAGS[row.get("bbq_proper_nouns_only", "").lower()],
                "source": row.source,
                "removal_reason": row.reason if row["class"] == "SR" else "",
            }
        )
    table = pd.DataFrame(rows, columns=ADAPTED_TEMPLATE.names)
    removed = table["class"] == "SR"
    return table[~removed].reset_index(drop=True), table[removed].reset_index(drop=True)
