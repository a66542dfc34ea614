"""The adaptation review sheet (PakBBQ §3.1, after KoBBQ): one row per BBQ template, the class the experts give
it and the columns they edit.

- **DT** (direct translation): BBQ's text and groups as they are; the instances are translated later.
- **TM** (target modified): text and groups rewritten for the target culture; a ``target_…`` field left empty
  keeps BBQ's, but at least one text field must be rewritten (else the row is DT).
- **NA** (newly added): a row the experts append, every text field and the stereotyped groups their own.
- **SR** (simply removed): not built, with the experts' reason.

BBQ's filling rules of a template (its ``Names`` lists, ``NAME1_info``/``NAME2_info`` and ``Proper_nouns_only``) are
carried in ``bbq_…`` columns the experts do not edit; a sheet written before they existed reads them as empty.
Groups are ``;``-separated. ``target_other_groups`` names the groups a stereotyped group is paired with; empty,
they are the category's other vocabulary groups (BBQ's rule). The sheet is written spreadsheet-safe (a cell that
would start a formula gets a ``'``) and read back with the ``'`` taken off.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..core.artifacts import from_spreadsheet, spreadsheet_safe
from ..core.inputs import LIST_SEPARATOR, InputError, read_csv_checked, require_none, spreadsheet_row
from .bbq_format import TEXT_FIELDS, parse_groups, text_problem
from .intersectional_format import INTERSECTIONAL_CATEGORIES, second_attribute

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


def is_reviewed(sheet: pd.DataFrame) -> bool:
    """Whether any row of a sheet has a class or an edited cell: a sheet not to overwrite unasked."""
    return bool((sheet.reindex(columns=["class", *EDITED, "reason"], fill_value="") != "").any(axis=None))


def _groups(value: str) -> list[str]:
    return [group.strip() for group in value.split(LIST_SEPARATOR) if group.strip()]


def _row_problem(row: pd.Series) -> str | None:
    """What is wrong with one reviewed row, or None."""
    kind = row["class"]
    if kind not in CLASSES:
        return f"class {kind!r} is not one of {', '.join(CLASSES)}"
    edited = [column for column in EDITED if row[column]]
    if kind == "SR":
        return None if row.reason else "SR (simply removed) needs its reason"
    if kind == "DT" and edited:
        return f"DT keeps BBQ's text and groups but {edited[0]} is filled: class the row TM"
    if kind == "TM" and not any(row[column] for column in TARGET_COLUMNS):
        return "TM (target modified) needs its modified text in at least one target_ column"
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
    problem = text_problem(_texts(row))
    return f"{kind} template: {problem}" if problem else None


def _texts(row: pd.Series) -> dict[str, str]:
    """The text fields a row's class gives: the experts' where they wrote one, else BBQ's."""
    return {field: row[f"target_{field}"] or row[f"bbq_{field}"] for field in TEXT_FIELDS}


def load_reviewed_sheet(path: Path) -> pd.DataFrame:
    """The reviewed sheet, every row checked: one :class:`InputError` naming the file, the row and the problem
    for an unknown class, an SR without its reason, a DT with edits, a TM without modified text, an NA without
    its text or groups, a template text without both slots, or a repeated template id."""
    required = [column for column in SHEET_COLUMNS if column not in RULE_COLUMNS]
    frame = read_csv_checked(path, required).reindex(columns=SHEET_COLUMNS, fill_value="").map(from_spreadsheet)
    frame["class"] = frame["class"].str.upper()
    require_none(path, frame["template_id"] == "", lambda _: "empty template_id")
    require_none(
        path, frame["template_id"].duplicated(), lambda i: f"template_id {frame.at[i, 'template_id']!r} appears twice"
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
                "proper_nouns_only": row.get("bbq_proper_nouns_only", "") == "TRUE",
                "source": row.source,
                "removal_reason": row.reason if row["class"] == "SR" else "",
            }
        )
    table = pd.DataFrame(rows, columns=ADAPTED_TEMPLATE.names)
    removed = table["class"] == "SR"
    return table[~removed].reset_index(drop=True), table[removed].reset_index(drop=True)
