"""BBQ's own template files, read as its generator reads them (nyu-mll/BBQ, ``generate_from_template_all_categories.py``
and ``utils.py``): ``templates-<Category>.csv`` (one row per template; a row with no ambiguous context is no
template), ``vocabulary.csv`` (the groups of each category; a row with ``Pilot_include`` = ``No`` is left out) and
``vocabulary_proper_names.csv`` (first names with their gender, the names of ``Proper_nouns_only`` templates).

A bad row is one :class:`~pbbq.tasks.core.inputs.InputError` naming the file, the row and the problem. This port
covers the categories BBQ fills from its vocabulary with one stereotyped and one other group in both orders
(``need_stereotyping_subset``: Nationality, Religion, Race_ethnicity, Sexual_orientation) and the categories it
fills from a template's own ``Names`` lists, its vocabulary or its first names (Age, Disability_status,
Physical_appearance, SES, Gender_identity), and Race_ethnicity's proper names (a first and a last name of one
ethnicity, :func:`~pbbq.tasks.adapt.generate.ethnic_name_fillings`). The files of BBQ's second generator
(Race_x_gender, Race_x_SES: a race and a second attribute per slot) are read into the same columns
(:mod:`pbbq.tasks.adapt.intersectional_format`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..core.inputs import InputError, read_csv_checked, require_none, spreadsheet_row
from .intersectional_format import (
    INTERSECTIONAL_CATEGORIES,
    RACE_COLUMN,
    REQUIRED_COLUMNS,
    SPELLINGS,
    from_second_generator,
    second_attribute,
)

TEXT_FIELDS: dict[str, str] = {
    "ambiguous": "Ambiguous_Context",
    "disambiguating": "Disambiguating_Context",
    "lexical_diversity": "Lexical_diversity",
    "question_negative": "Question_negative_stereotype",
    "question_non_negative": "Question_non_negative",
    "answer_negative": "Answer_negative",
    "answer_non_negative": "Answer_non_negative",
}
"""The project's name of each text field of a template → BBQ's column."""
TEMPLATE_COLUMNS = ["Q_id", "Category", *TEXT_FIELDS.values(), "Known_stereotyped_groups", "Notes"]
VOCABULARY_COLUMNS = ["Category", "Pilot_include", "SubCat", "Name", "Info"]
PAIRED_CATEGORIES = ("Race_ethnicity", "Religion", "Nationality", "Sexual_orientation")
"""BBQ's ``need_stereotyping_subset``: NAME1 is a stereotyped group, NAME2 one of the category's other groups, and
every pair is also built with the two exchanged."""
NAMED_CATEGORIES = ("Age", "Disability_status", "Physical_appearance", "SES", "Gender_identity")
"""The categories whose pairs come from a template's ``Names`` lists, the vocabulary within a subcategory or BBQ's
first names; the stereotyped one of the two is the one whose group is in ``Known_stereotyped_groups``."""
CATEGORY_SPELLINGS = {
    "DisabilityStatus": "Disability_status",
    "PhysicalAppearance": "Physical_appearance",
    "GenderIdentity": "Gender_identity",
    "SexualOrientation": "Sexual_orientation",
    "RaceEthnicity": "Race_ethnicity",
    **SPELLINGS,
}
"""How five of BBQ's template files spell their ``Category`` → the category BBQ's generator gives their examples
(it takes the category from the file name, not from the column)."""
OPTIONAL_COLUMNS = ["Subcategory", "version", "Names", "Proper_nouns_only", "NAME1_info", "NAME2_info"]
"""Columns some of BBQ's files have; a file without one reads as if its cells were empty."""
PROPER_NAME_COLUMNS = ["Name", "First_last", "gender", "ethnicity"]
BBQ_GENDER_WORDS = {"man": "M", "boy": "M", "woman": "F", "girl": "F"}
"""The group of BBQ's Gender_identity vocabulary words, as its analysis reads them (``BBQ_results_metadata.R``)."""
SLOTS = ("{{NAME1}}", "{{NAME2}}")
_LEXICAL = re.compile(r"^\s*(?:\{\{)?(WORD[12])(?:\}\})?\s*:\s*\[([^\[\]]*)\]\s*$")


def parse_lexical_diversity(value: str) -> dict[str, list[str]]:
    """``WORD1: [a, b]; WORD2: [c, d]`` as ``{"WORD1": [...], "WORD2": [...]}`` (BBQ's ``return_list_from_string``);
    ``{}`` for an empty cell. Raises ValueError for any other shape."""
    if not value.strip():
        return {}
    lists: dict[str, list[str]] = {}
    for part in value.split(";"):
        match = _LEXICAL.match(part)
        if match is None:
            raise ValueError(f"Lexical_diversity part {part.strip()!r} is not 'WORD1: [a, b]'")
        words = [word.strip() for word in match.group(2).split(",") if word.strip()]
        if match.group(1) in lists or not words:
            raise ValueError(f"Lexical_diversity gives {match.group(1)} twice or with no word")
        lists[match.group(1)] = words
    return lists


def parse_groups(value: str) -> list[str]:
    """``Known_stereotyped_groups``, a JSON list of strings (``["British"]``); ``[]`` for an empty cell."""
    if not value.strip():
        return []
    groups = json.loads(value)
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise ValueError("not a list of strings")
    return [group.strip() for group in groups]


def parse_names(value: str) -> tuple[list[str], list[str]]:
    """A ``Names`` cell (``NAME1: [a, b]; NAME2: [c, d]``) as BBQ's ``return_list_from_string`` reads it, quirks
    kept: the cell is split at every ``;`` (also one inside a list), a part naming neither slot is skipped, and a
    part after the NAME2 part that does not name NAME2 empties the NAME2 list (``wrds2 = ""``). So Disability 4
    ``[deaf person; hard-of-hearing person]`` keeps 'deaf person' alone, and a cell giving NAME2 first builds
    nothing, as in BBQ's released data. Raises ValueError for a cell without a NAME1 list."""
    first: list[str] | None = None
    second: list[str] = []
    for part in value.split(";"):
        words = [word.strip() for word in re.sub(r"\{*(?:WORD|NAME)[12]\}*:|[\[\]]", "", part).split(",")]
        if re.search("WORD1|NAME1", part):
            first = words
        second = words if re.search("WORD2|NAME2", part) else []
    if first is None:
        raise ValueError("Names gives no NAME1 list")
    return first, second


def normal_group(group: str) -> str:
    """A group as BBQ's analysis compares them: lower case, without spaces ('low SES' = 'lowSES')."""
    return group.lower().replace(" ", "")


def is_stereotyped(group: str, stereotyped: list[str]) -> bool:
    """Whether a filled group (a ``NAME1_info``, a vocabulary ``Info``, a name's gender) is one of a template's
    ``Known_stereotyped_groups``, compared whole (``BBQ_results_metadata.R``'s substring test makes 'old' match
    'nonOld', which it then corrects for Age)."""
    return normal_group(group) in {normal_group(target) for target in stereotyped}


def text_problem(texts: Mapping[str, str]) -> str | None:
    """What is wrong with a template's text fields (keys: :data:`TEXT_FIELDS`), or None: the ambiguous context
    names both slots, each answer names one of them (not the same), and every ``{{WORDn}}`` has its list."""
    if not all(slot in texts["ambiguous"] for slot in SLOTS):
        return "the ambiguous context must name both {{NAME1}} and {{NAME2}}"
    named = [{slot for slot in SLOTS if slot in texts[field]} for field in ("answer_negative", "answer_non_negative")]
    if len(named[0]) != 1 or len(named[1]) != 1 or named[0] == named[1]:
        return "the negative and the non-negative answer must each name one of {{NAME1}}, {{NAME2}}, not the same"
    try:
        lexical = parse_lexical_diversity(texts["lexical_diversity"])
    except ValueError as exc:
        return str(exc)
    used = " ".join(text for field, text in texts.items() if field != "lexical_diversity")
    missing = sorted(set(re.findall(r"\{\{(WORD[12])\}\}", used)) - set(lexical))
    return f"the text uses {{{{{missing[0]}}}}} but Lexical_diversity gives no {missing[0]} list" if missing else None


def _template_problem(row: pd.Series) -> str | None:
    """What is wrong with one template row of BBQ's format, or None."""
    if not row.Q_id:
        return "empty Q_id"
    categories = (*PAIRED_CATEGORIES, *NAMED_CATEGORIES, *INTERSECTIONAL_CATEGORIES)
    if row.Category not in categories:
        return f"category {row.Category!r}: only {', '.join(categories)} are generated by this port"
    if row.Category in INTERSECTIONAL_CATEGORIES:
        try:
            second_attribute(row.Names, row.Category)
        except ValueError:
            return (
                f"category {row.Category!r} needs the columns of BBQ's second generator ({', '.join(REQUIRED_COLUMNS)})"
            )
    if row.Proper_nouns_only not in ("", "TRUE", "FALSE"):
        return f"Proper_nouns_only {row.Proper_nouns_only!r} is not TRUE or FALSE"
    try:
        stereotyped = parse_groups(row.Known_stereotyped_groups)
    except ValueError as exc:
        return f"Known_stereotyped_groups {row.Known_stereotyped_groups!r}: {exc}"
    if row.Names and row.Category not in INTERSECTIONAL_CATEGORIES:  # theirs: checked by from_second_generator
        try:
            parse_names(row.Names)
        except ValueError as exc:
            return f"Names {row.Names!r}: {exc}"
    infos = [row.NAME1_info, row.NAME2_info]
    if any(infos) and sum(is_stereotyped(info, stereotyped) for info in infos) != 1:
        return f"NAME1_info {infos[0]!r} and NAME2_info {infos[1]!r}: exactly one must be a stereotyped group"
    return text_problem({field: row[column] for field, column in TEXT_FIELDS.items()})


def load_bbq_templates(path: Path) -> pd.DataFrame:
    """One BBQ ``templates-<Category>.csv``: its templates (rows with an ambiguous context), cells as written
    except ``Category`` stripped (BBQ's Religion file writes ``Religion ``) and spelled as the generator names it,
    each row checked. A row repeating another's ``Q_id`` and ``version`` (Gender_identity 7 has two rows, NAME1 female
    and NAME1 male) gets ``#2``, ``#3`` added to its ``version``, so that its template id is its own. A file of
    BBQ's second generator (it has ``Known_stereotyped_race``) is read into the same columns
    (:func:`~pbbq.tasks.adapt.intersectional_format.from_second_generator`)."""
    frame = read_csv_checked(path, [column for column in TEMPLATE_COLUMNS if column != "Known_stereotyped_groups"])
    second_generator = RACE_COLUMN in frame.columns
    if not second_generator and "Known_stereotyped_groups" not in frame.columns:
        raise InputError(path, 1, "missing column(s) Known_stereotyped_groups")
    frame = frame.reindex(columns=[*frame.columns, *(c for c in OPTIONAL_COLUMNS if c not in frame)], fill_value="")
    frame = frame[frame["Ambiguous_Context"] != ""]
    frame["Category"] = frame["Category"].replace(CATEGORY_SPELLINGS)
    if second_generator:
        frame = from_second_generator(path, frame)
    for index, row in frame.iterrows():
        problem = _template_problem(row)
        if problem:
            raise InputError(path, spreadsheet_row(index), problem)
    keys = frame["Category"] + "-" + frame["Q_id"] + frame["version"]
    repeat = frame.groupby(keys).cumcount()
    frame.loc[repeat > 0, "version"] += "#" + (repeat[repeat > 0] + 1).astype(str)
    return frame.reset_index(drop=True)


def load_bbq_vocabulary(path: Path) -> pd.DataFrame:
    """BBQ's ``vocabulary.csv`` without its ``Pilot_include = No`` rows; a row needs a category and a name, once."""
    frame = read_csv_checked(path, VOCABULARY_COLUMNS)
    require_none(path, (frame["Category"] == "") | (frame["Name"] == ""), lambda _: "empty Category or Name")
    require_none(
        path,
        frame.duplicated(["Category", "SubCat", "Name"]),
        lambda i: f"{frame.at[i, 'Category']} group {frame.at[i, 'Name']!r} appears twice",
    )
    return frame[frame["Pilot_include"] != "No"].reset_index(drop=True)


def load_bbq_proper_names(path: Path) -> pd.DataFrame:
    """BBQ's ``vocabulary_proper_names.csv``; a row needs a name, a ``First_last`` and, for a first name, a gender."""
    frame = read_csv_checked(path, PROPER_NAME_COLUMNS)
    require_none(
        path,
        (frame["Name"] == "")
        | (frame["First_last"] == "")
        | (frame["First_last"].str.startswith("first") & (frame["gender"] == "")),
        lambda _: "empty Name or First_last, or a first name without its gender",
    )
    return frame


def fills_from_vocabulary(templates: pd.DataFrame) -> pd.Series:
    """Whether each template (rows of :func:`load_bbq_templates`) takes its groups from ``vocabulary.csv``: it has
    no ``Names`` lists and is not ``Proper_nouns_only`` (Age, Disability_status and Physical_appearance have no
    vocabulary group at all, and need none)."""
    return (templates["Names"] == "") & (templates["Proper_nouns_only"] != "TRUE")
